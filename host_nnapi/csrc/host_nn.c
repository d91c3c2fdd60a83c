/* torchdroid host NNAPI: a libneuralnetworks.so for x86_64 Linux.
 *
 * The model-building half of the NNAPI C API is implemented here in C with
 * NNAPI's validation and return codes (operand types, quantization parameters,
 * value sizes, operation arity, state machine model -> compilation ->
 * execution).  Execution is delegated to an executor installed by Python
 * (host_nnapi.runtime), which reads the model back through the TorchdroidNN_*
 * accessors and runs reference kernels written with torch operations.
 *
 * When a process loads this library without installing an executor (e.g.
 * PyTorch's own test/test_nnapi.py with LIBNEURALNETWORKS_PATH), the first
 * Compilation_finish imports host_nnapi.runtime through the Python C API of the
 * hosting interpreter (resolved with dlsym, so the library never links
 * libpython) and lets it install itself.
 */
#define _GNU_SOURCE
#include "host_nn.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifndef TDNN_PACKAGE_PARENT
#define TDNN_PACKAGE_PARENT ""
#endif
#define TDNN_VERSION "torchdroid-host-nnapi 1"
#define EXPORT __attribute__((visibility("default")))

typedef struct {
  int32_t type;
  uint32_t rank;
  uint32_t* dims;
  float scale;
  int32_t zero_point;
  int lifetime;
  const void* value;   /* points into `owned` or at caller memory */
  size_t length;
  void* owned;
} Operand;

typedef struct {
  int32_t type;
  uint32_t n_in, n_out;
  uint32_t* ins;
  uint32_t* outs;
} Operation;

struct ANeuralNetworksModel {
  Operand* operands;
  uint32_t n_operands, cap_operands;
  Operation* operations;
  uint32_t n_operations, cap_operations;
  uint32_t* inputs;
  uint32_t n_inputs;
  uint32_t* outputs;
  uint32_t n_outputs;
  int io_identified;
  int finished;
  int relaxed;
  int compilations; /* live compilations referencing this model */
};

struct ANeuralNetworksCompilation {
  ANeuralNetworksModel* model;
  int32_t preference;
  int finished;
  int prepared; /* the executor accepted it */
};

typedef struct {
  void* buffer;
  size_t length;
  int set;
  uint32_t rank;      /* dimensions given at setInput/setOutput (0: none) */
  uint32_t* dims;
  uint32_t out_rank;  /* output dimensions reported by the executor */
  uint32_t* out_dims;
} IOBinding;

struct ANeuralNetworksExecution {
  ANeuralNetworksCompilation* compilation;
  IOBinding* in;
  IOBinding* out;
  int computed;
  int started;
};

struct ANeuralNetworksMemory {
  void* base;
  size_t size;
};

struct ANeuralNetworksEvent {
  int status;
};

static TorchdroidNN_Executor g_executor = NULL;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_last_error[1024];

static int fail(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static int fail(int code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
  va_end(ap);
  if (getenv("TORCHDROID_NNAPI_DEBUG")) fprintf(stderr, "host-nnapi: %s (error %d)\n", g_last_error, code);
  return code;
}

/* ------------------------------------------------------------------ operand types */

static int is_scalar_type(int32_t t) {
  return t == ANEURALNETWORKS_FLOAT32 || t == ANEURALNETWORKS_INT32 || t == ANEURALNETWORKS_UINT32 ||
         t == ANEURALNETWORKS_BOOL || t == ANEURALNETWORKS_FLOAT16;
}

static size_t element_size(int32_t t) {
  switch (t) {
    case ANEURALNETWORKS_FLOAT32: case ANEURALNETWORKS_INT32: case ANEURALNETWORKS_UINT32:
    case ANEURALNETWORKS_TENSOR_FLOAT32: case ANEURALNETWORKS_TENSOR_INT32: return 4;
    case ANEURALNETWORKS_TENSOR_QUANT8_ASYMM: case ANEURALNETWORKS_BOOL: case ANEURALNETWORKS_TENSOR_BOOL8:
    case ANEURALNETWORKS_TENSOR_QUANT8_SYMM_PER_CHANNEL: return 1;
    case ANEURALNETWORKS_TENSOR_QUANT16_SYMM: case ANEURALNETWORKS_TENSOR_QUANT16_ASYMM:
    case ANEURALNETWORKS_TENSOR_FLOAT16: case ANEURALNETWORKS_FLOAT16: return 2;
    default: return 0;
  }
}

/* Bytes of a fully specified operand, 0 if any dimension is unknown. */
static size_t operand_bytes(int32_t type, uint32_t rank, const uint32_t* dims) {
  size_t n = element_size(type);
  for (uint32_t i = 0; i < rank; i++) {
    if (dims[i] == 0) return 0;
    n *= dims[i];
  }
  return n;
}

static int validate_type(const ANeuralNetworksOperandType* t, int allow_unknown_rank, const char* what) {
  if (!t) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "%s: operand type is NULL", what);
  if (element_size(t->type) == 0)
    return fail(ANEURALNETWORKS_BAD_DATA, "%s: unknown operand type %d", what, t->type);
  if (t->type == ANEURALNETWORKS_TENSOR_QUANT8_SYMM_PER_CHANNEL || t->type == ANEURALNETWORKS_TENSOR_FLOAT16 ||
      t->type == ANEURALNETWORKS_FLOAT16 || t->type == ANEURALNETWORKS_TENSOR_BOOL8)
    return fail(ANEURALNETWORKS_BAD_DATA, "%s: operand type %d is not supported by the host NNAPI", what, t->type);
  if (is_scalar_type(t->type)) {
    if (t->dimensionCount != 0) return fail(ANEURALNETWORKS_BAD_DATA, "%s: scalar type %d with %u dimensions", what, t->type, t->dimensionCount);
    if (t->scale != 0.0f || t->zeroPoint != 0)
      return fail(ANEURALNETWORKS_BAD_DATA, "%s: scalar type %d with scale %g / zero point %d", what, t->type, t->scale, t->zeroPoint);
    return ANEURALNETWORKS_NO_ERROR;
  }
  if (t->dimensionCount > 0 && !t->dimensions)
    return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "%s: %u dimensions but a NULL dimension array", what, t->dimensionCount);
  if (t->dimensionCount == 0 && !allow_unknown_rank)
    return fail(ANEURALNETWORKS_BAD_DATA, "%s: tensor of unknown rank", what);
  switch (t->type) {
    case ANEURALNETWORKS_TENSOR_QUANT8_ASYMM:
      if (!(t->scale > 0.0f)) return fail(ANEURALNETWORKS_BAD_DATA, "%s: TENSOR_QUANT8_ASYMM needs scale > 0, got %g", what, t->scale);
      if (t->zeroPoint < 0 || t->zeroPoint > 255)
        return fail(ANEURALNETWORKS_BAD_DATA, "%s: TENSOR_QUANT8_ASYMM zero point %d outside [0, 255]", what, t->zeroPoint);
      break;
    case ANEURALNETWORKS_TENSOR_QUANT16_SYMM:
      if (!(t->scale > 0.0f) || t->zeroPoint != 0)
        return fail(ANEURALNETWORKS_BAD_DATA, "%s: TENSOR_QUANT16_SYMM needs scale > 0 and zero point 0", what);
      break;
    case ANEURALNETWORKS_TENSOR_QUANT16_ASYMM:
      if (!(t->scale > 0.0f) || t->zeroPoint < 0 || t->zeroPoint > 65535)
        return fail(ANEURALNETWORKS_BAD_DATA, "%s: TENSOR_QUANT16_ASYMM needs scale > 0 and zero point in [0, 65535]", what);
      break;
    case ANEURALNETWORKS_TENSOR_INT32:
      if (t->scale < 0.0f || t->zeroPoint != 0)  /* a bias carries scale = input scale x weight scale */
        return fail(ANEURALNETWORKS_BAD_DATA, "%s: TENSOR_INT32 with scale %g / zero point %d", what, t->scale, t->zeroPoint);
      break;
    default:
      if (t->scale != 0.0f || t->zeroPoint != 0)
        return fail(ANEURALNETWORKS_BAD_DATA, "%s: float tensor with scale %g / zero point %d", what, t->scale, t->zeroPoint);
  }
  return ANEURALNETWORKS_NO_ERROR;
}

/* ------------------------------------------------------------------ operations */

typedef struct { int32_t code; const char* name; uint8_t min_in, max_in, n_out; } OpSig;
/* Every operation torch's NNAPI serializer can emit, with the input counts NNAPI accepts. */
static const OpSig OPS[] = {
    {0, "ADD", 3, 3, 1},          {1, "AVERAGE_POOL_2D", 7, 11, 1}, {2, "CONCATENATION", 2, 255, 1},
    {3, "CONV_2D", 7, 13, 1},     {4, "DEPTHWISE_CONV_2D", 8, 14, 1}, {6, "DEQUANTIZE", 1, 1, 1},
    {9, "FULLY_CONNECTED", 4, 4, 1}, {14, "LOGISTIC", 1, 1, 1},   {17, "MAX_POOL_2D", 7, 11, 1},
    {18, "MUL", 3, 3, 1},         {19, "RELU", 1, 1, 1},          {20, "RELU1", 1, 1, 1},
    {21, "RELU6", 1, 1, 1},       {22, "RESHAPE", 2, 2, 1},       {25, "SOFTMAX", 2, 3, 1},
    {30, "DIV", 3, 3, 1},         {31, "MEAN", 3, 3, 1},          {35, "STRIDED_SLICE", 7, 7, 1},
    {36, "SUB", 3, 3, 1},         {37, "TRANSPOSE", 1, 2, 1},     {50, "EXPAND_DIMS", 2, 2, 1},
    {64, "LOG_SOFTMAX", 3, 3, 1}, {71, "PRELU", 2, 2, 1},         {72, "QUANTIZE", 1, 1, 1},
    {91, "TRANSPOSE_CONV_2D", 9, 11, 1}, {94, "RESIZE_NEAREST_NEIGHBOR", 3, 6, 1},
};

static const OpSig* find_op(int32_t code) {
  for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
    if (OPS[i].code == code) return &OPS[i];
  return NULL;
}

/* ------------------------------------------------------------------ Python bootstrap */

typedef int (*PyIsInit_t)(void);
typedef int (*PyGILEnsure_t)(void);
typedef void (*PyGILRelease_t)(int);
typedef int (*PyRunSimple_t)(const char*);

static int python_alive(void) {
  PyIsInit_t is_init = (PyIsInit_t)dlsym(RTLD_DEFAULT, "Py_IsInitialized");
  return is_init && is_init();
}

/* Append `text` as a Python string literal ('...', escaped) to `out`. */
static void py_literal(char* out, size_t cap, const char* text) {
  size_t n = strlen(out);
  if (n + 2 >= cap) return;
  out[n++] = '\'';
  for (const char* p = text; *p && n + 4 < cap; p++) {
    if (*p == '\\' || *p == '\'') out[n++] = '\\';
    out[n++] = *p;
  }
  out[n++] = '\'';
  out[n] = '\0';
}

/* Import host_nnapi.runtime in the hosting interpreter so it installs its executor. */
static void bootstrap_executor(void) {
  if (g_executor) return;
  if (getenv("TORCHDROID_NNAPI_NO_BOOTSTRAP")) return;
  PyGILEnsure_t ensure = (PyGILEnsure_t)dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
  PyGILRelease_t release = (PyGILRelease_t)dlsym(RTLD_DEFAULT, "PyGILState_Release");
  PyRunSimple_t run = (PyRunSimple_t)dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
  if (!python_alive() || !ensure || !release || !run) return;
  Dl_info info;
  const char* self = "";
  if (dladdr((void*)&bootstrap_executor, &info) && info.dli_fname) self = info.dli_fname;
  char code[8192] = "def _torchdroid_host_nnapi_bootstrap():\n"
                    "    import sys\n"
                    "    parent = ";
  py_literal(code, sizeof code, TDNN_PACKAGE_PARENT);
  strncat(code, "\n    if parent and parent not in sys.path:\n"
                "        sys.path.append(parent)\n"
                "    import host_nnapi.runtime as r\n"
                "    r.attach(", sizeof code - strlen(code) - 1);
  py_literal(code, sizeof code, self);
  strncat(code, ")\n_torchdroid_host_nnapi_bootstrap()\ndel _torchdroid_host_nnapi_bootstrap\n",
          sizeof code - strlen(code) - 1);
  int st = ensure();
  run(code);
  release(st);
}

static int call_executor(int kind, void* compilation, void* execution) {
  TorchdroidNN_Executor ex = g_executor;
  if (!ex) return fail(ANEURALNETWORKS_OP_FAILED,
                       "no executor is installed: import host_nnapi.runtime and call attach() in this process");
  g_last_error[0] = '\0';
  int rc = ex(kind, compilation, execution);
  if (rc != ANEURALNETWORKS_NO_ERROR && !g_last_error[0]) fail(rc, "the executor failed (kind %d)", kind);
  return rc;
}

/* ------------------------------------------------------------------ TorchdroidNN_* */

EXPORT const char* TorchdroidNN_version(void) { return TDNN_VERSION; }
EXPORT void TorchdroidNN_setExecutor(TorchdroidNN_Executor ex) { g_executor = ex; }
EXPORT int TorchdroidNN_hasExecutor(void) { return g_executor != NULL; }
EXPORT const char* TorchdroidNN_lastError(void) { return g_last_error; }
EXPORT void TorchdroidNN_setLastError(const char* msg) {
  snprintf(g_last_error, sizeof g_last_error, "%s", msg ? msg : "");
}

EXPORT int TorchdroidNN_modelCounts(const ANeuralNetworksModel* m, uint32_t* out4) {
  if (!m || !out4) return ANEURALNETWORKS_UNEXPECTED_NULL;
  out4[0] = m->n_operands; out4[1] = m->n_operations; out4[2] = m->n_inputs; out4[3] = m->n_outputs;
  return ANEURALNETWORKS_NO_ERROR;
}

EXPORT int TorchdroidNN_operand(const ANeuralNetworksModel* m, uint32_t i, int32_t* type, uint32_t* rank,
                                const uint32_t** dims, float* scale, int32_t* zp, int* lifetime,
                                const void** value, size_t* length) {
  if (!m || i >= m->n_operands) return ANEURALNETWORKS_BAD_DATA;
  const Operand* o = &m->operands[i];
  *type = o->type; *rank = o->rank; *dims = o->dims; *scale = o->scale; *zp = o->zero_point;
  *lifetime = o->lifetime; *value = o->value; *length = o->length;
  return ANEURALNETWORKS_NO_ERROR;
}

EXPORT int TorchdroidNN_operation(const ANeuralNetworksModel* m, uint32_t i, int32_t* type, uint32_t* n_in,
                                  const uint32_t** ins, uint32_t* n_out, const uint32_t** outs) {
  if (!m || i >= m->n_operations) return ANEURALNETWORKS_BAD_DATA;
  const Operation* op = &m->operations[i];
  *type = op->type; *n_in = op->n_in; *ins = op->ins; *n_out = op->n_out; *outs = op->outs;
  return ANEURALNETWORKS_NO_ERROR;
}

EXPORT int TorchdroidNN_modelIO(const ANeuralNetworksModel* m, const uint32_t** ins, const uint32_t** outs) {
  if (!m) return ANEURALNETWORKS_UNEXPECTED_NULL;
  *ins = m->inputs; *outs = m->outputs;
  return ANEURALNETWORKS_NO_ERROR;
}

EXPORT const ANeuralNetworksModel* TorchdroidNN_compilationModel(const ANeuralNetworksCompilation* c) {
  return c ? c->model : NULL;
}

EXPORT const ANeuralNetworksCompilation* TorchdroidNN_executionCompilation(const ANeuralNetworksExecution* e) {
  return e ? e->compilation : NULL;
}

EXPORT int TorchdroidNN_executionIO(const ANeuralNetworksExecution* e, int is_output, uint32_t i, void** buffer,
                                    size_t* length, uint32_t* rank, const uint32_t** dims) {
  if (!e) return ANEURALNETWORKS_UNEXPECTED_NULL;
  const ANeuralNetworksModel* m = e->compilation->model;
  if (i >= (is_output ? m->n_outputs : m->n_inputs)) return ANEURALNETWORKS_BAD_DATA;
  const IOBinding* b = is_output ? &e->out[i] : &e->in[i];
  *buffer = b->buffer; *length = b->length; *rank = b->rank; *dims = b->dims;
  return ANEURALNETWORKS_NO_ERROR;
}

EXPORT int TorchdroidNN_setOutputDims(ANeuralNetworksExecution* e, uint32_t i, uint32_t rank, const uint32_t* dims) {
  if (!e) return ANEURALNETWORKS_UNEXPECTED_NULL;
  if (i >= e->compilation->model->n_outputs) return ANEURALNETWORKS_BAD_DATA;
  IOBinding* b = &e->out[i];
  free(b->out_dims);
  b->out_dims = rank ? malloc(rank * sizeof(uint32_t)) : NULL;
  if (rank && !b->out_dims) return ANEURALNETWORKS_OUT_OF_MEMORY;
  if (rank) memcpy(b->out_dims, dims, rank * sizeof(uint32_t));
  b->out_rank = rank;
  return ANEURALNETWORKS_NO_ERROR;
}

/* ------------------------------------------------------------------ devices */

static struct ANeuralNetworksDevice { int dummy; } g_device;

EXPORT int ANeuralNetworks_getDeviceCount(uint32_t* n) {
  if (!n) return ANEURALNETWORKS_UNEXPECTED_NULL;
  *n = 1;
  return ANEURALNETWORKS_NO_ERROR;
}
EXPORT int ANeuralNetworks_getDevice(uint32_t index, ANeuralNetworksDevice** device) {
  if (!device) return ANEURALNETWORKS_UNEXPECTED_NULL;
  if (index != 0) return ANEURALNETWORKS_BAD_DATA;
  *device = &g_device;
  return ANEURALNETWORKS_NO_ERROR;
}
EXPORT int ANeuralNetworksDevice_getName(const ANeuralNetworksDevice* d, const char** name) {
  if (!d || !name) return ANEURALNETWORKS_UNEXPECTED_NULL;
  *name = "torchdroid-host-reference";
  return ANEURALNETWORKS_NO_ERROR;
}
EXPORT int ANeuralNetworksDevice_getVersion(const ANeuralNetworksDevice* d, const char** version) {
  if (!d || !version) return ANEURALNETWORKS_UNEXPECTED_NULL;
  *version = TDNN_VERSION;
  return ANEURALNETWORKS_NO_ERROR;
}
EXPORT int ANeuralNetworksDevice_getFeatureLevel(const ANeuralNetworksDevice* d, int64_t* level) {
  if (!d || !level) return ANEURALNETWORKS_UNEXPECTED_NULL;
  *level = 29; /* NNAPI 1.2 (Android 10): what torch's serializer targets */
  return ANEURALNETWORKS_NO_ERROR;
}

/* ------------------------------------------------------------------ memory */

EXPORT int ANeuralNetworksMemory_createFromFd(size_t size, int protect, int fd, size_t offset, ANeuralNetworksMemory** memory) {
  if (!memory) return ANEURALNETWORKS_UNEXPECTED_NULL;
  *memory = NULL;
  void* base = mmap(NULL, size, protect, MAP_SHARED, fd, (off_t)offset);
  if (base == MAP_FAILED) return fail(ANEURALNETWORKS_UNMAPPABLE, "Memory_createFromFd: mmap failed");
  ANeuralNetworksMemory* m = calloc(1, sizeof *m);
  if (!m) { munmap(base, size); return ANEURALNETWORKS_OUT_OF_MEMORY; }
  m->base = base; m->size = size;
  *memory = m;
  return ANEURALNETWORKS_NO_ERROR;
}
EXPORT void ANeuralNetworksMemory_free(ANeuralNetworksMemory* m) {
  if (!m) return;
  munmap(m->base, m->size);
  free(m);
}

/* ------------------------------------------------------------------ model */

EXPORT int ANeuralNetworksModel_create(ANeuralNetworksModel** model) {
  if (!model) return ANEURALNETWORKS_UNEXPECTED_NULL;
  *model = calloc(1, sizeof **model);
  return *model ? ANEURALNETWORKS_NO_ERROR : ANEURALNETWORKS_OUT_OF_MEMORY;
}

EXPORT void ANeuralNetworksModel_free(ANeuralNetworksModel* m) {
  if (!m) return;
  for (uint32_t i = 0; i < m->n_operands; i++) { free(m->operands[i].dims); free(m->operands[i].owned); }
  for (uint32_t i = 0; i < m->n_operations; i++) { free(m->operations[i].ins); free(m->operations[i].outs); }
  free(m->operands); free(m->operations); free(m->inputs); free(m->outputs);
  free(m);
}

EXPORT int ANeuralNetworksModel_addOperand(ANeuralNetworksModel* m, const ANeuralNetworksOperandType* t) {
  if (!m || !t) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Model_addOperand: NULL argument");
  if (m->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Model_addOperand: model already finished");
  char what[64];
  snprintf(what, sizeof what, "Model_addOperand #%u", m->n_operands);
  int rc = validate_type(t, 1, what);
  if (rc) return rc;
  if (m->n_operands == m->cap_operands) {
    uint32_t cap = m->cap_operands ? m->cap_operands * 2 : 64;
    Operand* p = realloc(m->operands, cap * sizeof *p);
    if (!p) return ANEURALNETWORKS_OUT_OF_MEMORY;
    m->operands = p; m->cap_operands = cap;
  }
  Operand* o = &m->operands[m->n_operands];
  memset(o, 0, sizeof *o);
  o->type = t->type; o->rank = t->dimensionCount; o->scale = t->scale; o->zero_point = t->zeroPoint;
  if (o->rank) {
    o->dims = malloc(o->rank * sizeof(uint32_t));
    if (!o->dims) return ANEURALNETWORKS_OUT_OF_MEMORY;
    memcpy(o->dims, t->dimensions, o->rank * sizeof(uint32_t));
  }
  m->n_operands++;
  return ANEURALNETWORKS_NO_ERROR;
}

static int set_value(ANeuralNetworksModel* m, int32_t index, const void* buffer, size_t length, int copy_small) {
  if (!m) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Model_setOperandValue: NULL model");
  if (m->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Model_setOperandValue: model already finished");
  if (index < 0 || (uint32_t)index >= m->n_operands)
    return fail(ANEURALNETWORKS_BAD_DATA, "Model_setOperandValue: operand %d out of range (%u operands)", index, m->n_operands);
  Operand* o = &m->operands[index];
  if (!buffer) {
    if (length != 0) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Model_setOperandValue: NULL buffer of length %zu", length);
    o->lifetime = TDNN_NO_VALUE;
    return ANEURALNETWORKS_NO_ERROR;
  }
  size_t need = is_scalar_type(o->type) ? element_size(o->type) : operand_bytes(o->type, o->rank, o->dims);
  if (need == 0 && !is_scalar_type(o->type))
    return fail(ANEURALNETWORKS_BAD_DATA, "Model_setOperandValue: operand %d has unknown dimensions", index);
  if (length != need)
    return fail(ANEURALNETWORKS_BAD_DATA, "Model_setOperandValue: operand %d needs %zu bytes, got %zu", index, need, length);
  free(o->owned);
  o->owned = NULL;
  if (copy_small && length <= ANEURALNETWORKS_MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES) {
    o->owned = malloc(length ? length : 1);
    if (!o->owned) return ANEURALNETWORKS_OUT_OF_MEMORY;
    memcpy(o->owned, buffer, length);
    o->value = o->owned;
  } else {
    o->value = buffer; /* NNAPI: larger values are referenced; the caller keeps them alive */
  }
  o->length = length;
  o->lifetime = TDNN_CONSTANT;
  return ANEURALNETWORKS_NO_ERROR;
}

EXPORT int ANeuralNetworksModel_setOperandValue(ANeuralNetworksModel* m, int32_t index, const void* buffer, size_t length) {
  return set_value(m, index, buffer, length, 1);
}

EXPORT int ANeuralNetworksModel_setOperandValueFromMemory(ANeuralNetworksModel* m, int32_t index,
                                                         const ANeuralNetworksMemory* mem, size_t offset, size_t length) {
  if (!mem) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Model_setOperandValueFromMemory: NULL memory");
  if (offset + length > mem->size || offset + length < offset)
    return fail(ANEURALNETWORKS_BAD_DATA, "Model_setOperandValueFromMemory: range beyond the memory object");
  return set_value(m, index, (const char*)mem->base + offset, length, 0);
}

EXPORT int ANeuralNetworksModel_addOperation(ANeuralNetworksModel* m, ANeuralNetworksOperationType type,
                                             uint32_t n_in, const uint32_t* ins, uint32_t n_out, const uint32_t* outs) {
  if (!m || (n_in && !ins) || (n_out && !outs)) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Model_addOperation: NULL argument");
  if (m->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Model_addOperation: model already finished");
  const OpSig* sig = find_op(type);
  if (!sig) return fail(ANEURALNETWORKS_BAD_DATA, "Model_addOperation: operation type %d is not supported by the host NNAPI", type);
  if (n_in < sig->min_in || n_in > sig->max_in || n_out != sig->n_out)
    return fail(ANEURALNETWORKS_BAD_DATA, "Model_addOperation: %s takes %u..%u inputs and %u output(s), got %u and %u",
                sig->name, sig->min_in, sig->max_in, sig->n_out, n_in, n_out);
  for (uint32_t i = 0; i < n_in; i++)
    if (ins[i] >= m->n_operands)
      return fail(ANEURALNETWORKS_BAD_DATA, "Model_addOperation: %s input %u refers to operand %u of %u", sig->name, i, ins[i], m->n_operands);
  for (uint32_t i = 0; i < n_out; i++) {
    if (outs[i] >= m->n_operands)
      return fail(ANEURALNETWORKS_BAD_DATA, "Model_addOperation: %s output %u refers to operand %u of %u", sig->name, i, outs[i], m->n_operands);
    if (m->operands[outs[i]].lifetime == TDNN_CONSTANT)
      return fail(ANEURALNETWORKS_BAD_DATA, "Model_addOperation: %s writes constant operand %u", sig->name, outs[i]);
    for (uint32_t k = 0; k < m->n_operations; k++)
      for (uint32_t j = 0; j < m->operations[k].n_out; j++)
        if (m->operations[k].outs[j] == outs[i])
          return fail(ANEURALNETWORKS_BAD_DATA, "Model_addOperation: operand %u is written by two operations", outs[i]);
  }
  if (m->n_operations == m->cap_operations) {
    uint32_t cap = m->cap_operations ? m->cap_operations * 2 : 32;
    Operation* p = realloc(m->operations, cap * sizeof *p);
    if (!p) return ANEURALNETWORKS_OUT_OF_MEMORY;
    m->operations = p; m->cap_operations = cap;
  }
  Operation* op = &m->operations[m->n_operations];
  op->type = type; op->n_in = n_in; op->n_out = n_out;
  op->ins = malloc((n_in ? n_in : 1) * sizeof(uint32_t));
  op->outs = malloc((n_out ? n_out : 1) * sizeof(uint32_t));
  if (!op->ins || !op->outs) { free(op->ins); free(op->outs); return ANEURALNETWORKS_OUT_OF_MEMORY; }
  memcpy(op->ins, ins, n_in * sizeof(uint32_t));
  memcpy(op->outs, outs, n_out * sizeof(uint32_t));
  m->n_operations++;
  return ANEURALNETWORKS_NO_ERROR;
}

EXPORT int ANeuralNetworksModel_identifyInputsAndOutputs(ANeuralNetworksModel* m, uint32_t n_in, const uint32_t* ins,
                                                         uint32_t n_out, const uint32_t* outs) {
  if (!m || (n_in && !ins) || (n_out && !outs)) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Model_identifyInputsAndOutputs: NULL argument");
  if (m->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Model_identifyInputsAndOutputs: model already finished");
  for (uint32_t i = 0; i < n_in; i++) {
    if (ins[i] >= m->n_operands) return fail(ANEURALNETWORKS_BAD_DATA, "model input %u refers to operand %u of %u", i, ins[i], m->n_operands);
    if (m->operands[ins[i]].lifetime == TDNN_CONSTANT) return fail(ANEURALNETWORKS_BAD_DATA, "model input %u is a constant", i);
  }
  for (uint32_t i = 0; i < n_out; i++) {
    if (outs[i] >= m->n_operands) return fail(ANEURALNETWORKS_BAD_DATA, "model output %u refers to operand %u of %u", i, outs[i], m->n_operands);
    if (m->operands[outs[i]].lifetime == TDNN_CONSTANT) return fail(ANEURALNETWORKS_BAD_DATA, "model output %u is a constant", i);
  }
  free(m->inputs); free(m->outputs);
  m->inputs = malloc((n_in ? n_in : 1) * sizeof(uint32_t));
  m->outputs = malloc((n_out ? n_out : 1) * sizeof(uint32_t));
  if (!m->inputs || !m->outputs) return ANEURALNETWORKS_OUT_OF_MEMORY;
  memcpy(m->inputs, ins, n_in * sizeof(uint32_t));
  memcpy(m->outputs, outs, n_out * sizeof(uint32_t));
  m->n_inputs = n_in; m->n_outputs = n_out;
  for (uint32_t i = 0; i < n_in; i++) m->operands[ins[i]].lifetime = TDNN_MODEL_INPUT;
  for (uint32_t i = 0; i < n_out; i++) m->operands[outs[i]].lifetime = TDNN_MODEL_OUTPUT;
  m->io_identified = 1;
  return ANEURALNETWORKS_NO_ERROR;
}

EXPORT int ANeuralNetworksModel_relaxComputationFloat32toFloat16(ANeuralNetworksModel* m, bool allow) {
  if (!m) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Model_relaxComputationFloat32toFloat16: NULL model");
  if (m->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Model_relaxComputationFloat32toFloat16: model already finished");
  m->relaxed = allow ? 1 : 0;
  return ANEURALNETWORKS_NO_ERROR;
}

EXPORT int ANeuralNetworksModel_finish(ANeuralNetworksModel* m) {
  if (!m) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Model_finish: NULL model");
  if (m->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Model_finish: model already finished");
  if (!m->io_identified || m->n_outputs == 0) return fail(ANEURALNETWORKS_BAD_DATA, "Model_finish: inputs and outputs were not identified");
  /* every operation input must be a constant, a model input or another operation's output */
  for (uint32_t k = 0; k < m->n_operations; k++) {
    const Operation* op = &m->operations[k];
    for (uint32_t i = 0; i < op->n_in; i++) {
      const Operand* o = &m->operands[op->ins[i]];
      if (o->lifetime != TDNN_TEMPORARY && o->lifetime != TDNN_MODEL_OUTPUT) continue;
      int written = 0;
      for (uint32_t q = 0; q < m->n_operations && !written; q++)
        for (uint32_t j = 0; j < m->operations[q].n_out; j++)
          if (m->operations[q].outs[j] == op->ins[i]) { written = 1; break; }
      if (!written)
        return fail(ANEURALNETWORKS_BAD_DATA, "Model_finish: operation %u (%s) reads operand %u that has no value and no producer",
                    k, find_op(op->type)->name, op->ins[i]);
    }
  }
  m->finished = 1;
  return ANEURALNETWORKS_NO_ERROR;
}

EXPORT int ANeuralNetworksModel_getSupportedOperationsForDevices(const ANeuralNetworksModel* m, const ANeuralNetworksDevice* const* devices,
                                                                 uint32_t n, bool* supported) {
  if (!m || !devices || !supported) return ANEURALNETWORKS_UNEXPECTED_NULL;
  if (!m->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Model_getSupportedOperationsForDevices: model not finished");
  for (uint32_t i = 0; i < n; i++) if (devices[i] != &g_device) return ANEURALNETWORKS_BAD_DATA;
  for (uint32_t k = 0; k < m->n_operations; k++) supported[k] = true;
  return ANEURALNETWORKS_NO_ERROR;
}

/* ------------------------------------------------------------------ compilation */

EXPORT int ANeuralNetworksCompilation_create(ANeuralNetworksModel* m, ANeuralNetworksCompilation** c) {
  if (!m || !c) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Compilation_create: NULL argument");
  *c = NULL;
  if (!m->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Compilation_create: the model is not finished");
  ANeuralNetworksCompilation* comp = calloc(1, sizeof *comp);
  if (!comp) return ANEURALNETWORKS_OUT_OF_MEMORY;
  comp->model = m;
  comp->preference = 1; /* ANEURALNETWORKS_PREFER_FAST_SINGLE_ANSWER */
  m->compilations++;
  *c = comp;
  return ANEURALNETWORKS_NO_ERROR;
}

EXPORT int ANeuralNetworksCompilation_createForDevices(ANeuralNetworksModel* m, const ANeuralNetworksDevice* const* devices,
                                                       uint32_t n, ANeuralNetworksCompilation** c) {
  if (!devices || n == 0) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Compilation_createForDevices: no devices");
  for (uint32_t i = 0; i < n; i++)
    if (devices[i] != &g_device) return fail(ANEURALNETWORKS_BAD_DATA, "Compilation_createForDevices: unknown device");
  return ANeuralNetworksCompilation_create(m, c);
}

EXPORT void ANeuralNetworksCompilation_free(ANeuralNetworksCompilation* c) {
  if (!c) return;
  if (c->prepared && g_executor && python_alive()) g_executor(TDNN_RELEASE, c, NULL);
  c->model->compilations--;
  free(c);
}

EXPORT int ANeuralNetworksCompilation_setPreference(ANeuralNetworksCompilation* c, int32_t preference) {
  if (!c) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Compilation_setPreference: NULL compilation");
  if (c->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Compilation_setPreference: compilation already finished");
  if (preference < 0 || preference > 2) return fail(ANEURALNETWORKS_BAD_DATA, "Compilation_setPreference: unknown preference %d", preference);
  c->preference = preference;
  return ANEURALNETWORKS_NO_ERROR;
}

EXPORT int ANeuralNetworksCompilation_finish(ANeuralNetworksCompilation* c) {
  if (!c) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Compilation_finish: NULL compilation");
  if (c->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Compilation_finish: compilation already finished");
  pthread_mutex_lock(&g_lock);
  if (!g_executor) bootstrap_executor();
  pthread_mutex_unlock(&g_lock);
  int rc = call_executor(TDNN_PREPARE, c, NULL);
  if (rc) return rc;
  c->prepared = 1;
  c->finished = 1;
  return ANEURALNETWORKS_NO_ERROR;
}

/* ------------------------------------------------------------------ execution */

EXPORT int ANeuralNetworksExecution_create(ANeuralNetworksCompilation* c, ANeuralNetworksExecution** e) {
  if (!c || !e) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Execution_create: NULL argument");
  *e = NULL;
  if (!c->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Execution_create: the compilation is not finished");
  ANeuralNetworksExecution* ex = calloc(1, sizeof *ex);
  if (!ex) return ANEURALNETWORKS_OUT_OF_MEMORY;
  ex->compilation = c;
  ex->in = calloc(c->model->n_inputs ? c->model->n_inputs : 1, sizeof(IOBinding));
  ex->out = calloc(c->model->n_outputs ? c->model->n_outputs : 1, sizeof(IOBinding));
  if (!ex->in || !ex->out) { free(ex->in); free(ex->out); free(ex); return ANEURALNETWORKS_OUT_OF_MEMORY; }
  *e = ex;
  return ANEURALNETWORKS_NO_ERROR;
}

EXPORT void ANeuralNetworksExecution_free(ANeuralNetworksExecution* e) {
  if (!e) return;
  const ANeuralNetworksModel* m = e->compilation->model;
  for (uint32_t i = 0; i < m->n_inputs; i++) free(e->in[i].dims);
  for (uint32_t i = 0; i < m->n_outputs; i++) { free(e->out[i].dims); free(e->out[i].out_dims); }
  free(e->in); free(e->out); free(e);
}

/* NNAPI: a type given at setInput/setOutput may only fill in unknown dimensions. */
static int bind(ANeuralNetworksExecution* e, int is_output, int32_t index, const ANeuralNetworksOperandType* type,
                void* buffer, size_t length) {
  const char* fn = is_output ? "Execution_setOutput" : "Execution_setInput";
  if (!e) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "%s: NULL execution", fn);
  if (e->started) return fail(ANEURALNETWORKS_BAD_STATE, "%s: the execution already started", fn);
  const ANeuralNetworksModel* m = e->compilation->model;
  uint32_t n = is_output ? m->n_outputs : m->n_inputs;
  if (index < 0 || (uint32_t)index >= n) return fail(ANEURALNETWORKS_BAD_DATA, "%s: index %d out of range (%u)", fn, index, n);
  const Operand* o = &m->operands[is_output ? m->outputs[index] : m->inputs[index]];
  if (!buffer && length) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "%s: NULL buffer of length %zu", fn, length);
  uint32_t rank = o->rank;
  const uint32_t* dims = o->dims;
  if (type) {
    char what[64];
    snprintf(what, sizeof what, "%s #%d", fn, index);
    int rc = validate_type(type, 1, what);
    if (rc) return rc;
    if (type->type != o->type)
      return fail(ANEURALNETWORKS_BAD_DATA, "%s #%d: operand type %d given, the model says %d", fn, index, type->type, o->type);
    if (type->scale != o->scale || type->zeroPoint != o->zero_point)
      return fail(ANEURALNETWORKS_BAD_DATA,
                  "%s #%d: quantization (scale %g, zero point %d) differs from the model's (scale %g, zero point %d): "
                  "NNAPI fixes them when the model is built",
                  fn, index, type->scale, type->zeroPoint, o->scale, o->zero_point);
    if (type->dimensionCount) {
      if (o->rank && type->dimensionCount != o->rank)
        return fail(ANEURALNETWORKS_BAD_DATA, "%s #%d: rank %u given, the model says %u", fn, index, type->dimensionCount, o->rank);
      for (uint32_t i = 0; i < o->rank; i++)
        if (o->dims[i] && type->dimensions[i] != o->dims[i])
          return fail(ANEURALNETWORKS_BAD_DATA, "%s #%d: dimension %u is %u, the model says %u", fn, index, i, type->dimensions[i], o->dims[i]);
      rank = type->dimensionCount;
      dims = type->dimensions;
    }
  }
  size_t need = operand_bytes(o->type, rank, dims);
  if (!is_output && need == 0 && rank > 0)
    return fail(ANEURALNETWORKS_BAD_DATA, "%s #%d: the input's dimensions are not fully specified", fn, index);
  if (!is_output && need && length != need)
    return fail(ANEURALNETWORKS_BAD_DATA, "%s #%d: buffer of %zu bytes, the operand needs %zu", fn, index, length, need);
  if (is_output && need && length < need)
    return fail(ANEURALNETWORKS_BAD_DATA, "%s #%d: buffer of %zu bytes, the operand needs %zu", fn, index, length, need);
  IOBinding* b = is_output ? &e->out[index] : &e->in[index];
  free(b->dims);
  b->dims = NULL;
  b->rank = 0;
  if (dims && rank) {
    b->dims = malloc(rank * sizeof(uint32_t));
    if (!b->dims) return ANEURALNETWORKS_OUT_OF_MEMORY;
    memcpy(b->dims, dims, rank * sizeof(uint32_t));
    b->rank = rank;
  }
  b->buffer = buffer; b->length = length; b->set = 1;
  return ANEURALNETWORKS_NO_ERROR;
}

EXPORT int ANeuralNetworksExecution_setInput(ANeuralNetworksExecution* e, int32_t index, const ANeuralNetworksOperandType* type,
                                             const void* buffer, size_t length) {
  return bind(e, 0, index, type, (void*)buffer, length);
}
EXPORT int ANeuralNetworksExecution_setOutput(ANeuralNetworksExecution* e, int32_t index, const ANeuralNetworksOperandType* type,
                                              void* buffer, size_t length) {
  return bind(e, 1, index, type, buffer, length);
}
EXPORT int ANeuralNetworksExecution_setInputFromMemory(ANeuralNetworksExecution* e, int32_t index, const ANeuralNetworksOperandType* type,
                                                       const ANeuralNetworksMemory* mem, size_t offset, size_t length) {
  if (!mem) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Execution_setInputFromMemory: NULL memory");
  if (offset + length > mem->size) return fail(ANEURALNETWORKS_BAD_DATA, "Execution_setInputFromMemory: range beyond the memory");
  return bind(e, 0, index, type, (char*)mem->base + offset, length);
}
EXPORT int ANeuralNetworksExecution_setOutputFromMemory(ANeuralNetworksExecution* e, int32_t index, const ANeuralNetworksOperandType* type,
                                                        const ANeuralNetworksMemory* mem, size_t offset, size_t length) {
  if (!mem) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Execution_setOutputFromMemory: NULL memory");
  if (offset + length > mem->size) return fail(ANEURALNETWORKS_BAD_DATA, "Execution_setOutputFromMemory: range beyond the memory");
  return bind(e, 1, index, type, (char*)mem->base + offset, length);
}

EXPORT int ANeuralNetworksExecution_compute(ANeuralNetworksExecution* e) {
  if (!e) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Execution_compute: NULL execution");
  if (e->started) return fail(ANEURALNETWORKS_BAD_STATE, "Execution_compute: an execution runs only once");
  const ANeuralNetworksModel* m = e->compilation->model;
  for (uint32_t i = 0; i < m->n_inputs; i++)
    if (!e->in[i].set) return fail(ANEURALNETWORKS_BAD_DATA, "Execution_compute: input %u was not set", i);
  for (uint32_t i = 0; i < m->n_outputs; i++)
    if (!e->out[i].set) return fail(ANEURALNETWORKS_BAD_DATA, "Execution_compute: output %u was not set", i);
  e->started = 1;
  int rc = call_executor(TDNN_COMPUTE, e->compilation, e);
  e->computed = rc == ANEURALNETWORKS_NO_ERROR || rc == ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE;
  return rc;
}

EXPORT int ANeuralNetworksExecution_startCompute(ANeuralNetworksExecution* e, ANeuralNetworksEvent** event) {
  if (!event) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Execution_startCompute: NULL event");
  *event = calloc(1, sizeof **event);
  if (!*event) return ANEURALNETWORKS_OUT_OF_MEMORY;
  (*event)->status = ANeuralNetworksExecution_compute(e); /* synchronous: the event is already signalled */
  return ANEURALNETWORKS_NO_ERROR;
}
EXPORT int ANeuralNetworksEvent_wait(ANeuralNetworksEvent* event) {
  if (!event) return ANEURALNETWORKS_UNEXPECTED_NULL;
  return event->status;
}
EXPORT void ANeuralNetworksEvent_free(ANeuralNetworksEvent* event) { free(event); }

EXPORT int ANeuralNetworksExecution_getOutputOperandRank(ANeuralNetworksExecution* e, int32_t index, uint32_t* rank) {
  if (!e || !rank) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Execution_getOutputOperandRank: NULL argument");
  if (!e->computed) return fail(ANEURALNETWORKS_BAD_STATE, "Execution_getOutputOperandRank: the execution has not computed");
  if (index < 0 || (uint32_t)index >= e->compilation->model->n_outputs) return ANEURALNETWORKS_BAD_DATA;
  *rank = e->out[index].out_rank;
  return ANEURALNETWORKS_NO_ERROR;
}
EXPORT int ANeuralNetworksExecution_getOutputOperandDimensions(ANeuralNetworksExecution* e, int32_t index, uint32_t* dims) {
  if (!e || !dims) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Execution_getOutputOperandDimensions: NULL argument");
  if (!e->computed) return fail(ANEURALNETWORKS_BAD_STATE, "Execution_getOutputOperandDimensions: the execution has not computed");
  if (index < 0 || (uint32_t)index >= e->compilation->model->n_outputs) return ANEURALNETWORKS_BAD_DATA;
  const IOBinding* b = &e->out[index];
  if (b->out_rank) memcpy(dims, b->out_dims, b->out_rank * sizeof(uint32_t));
  return ANEURALNETWORKS_NO_ERROR;
}
