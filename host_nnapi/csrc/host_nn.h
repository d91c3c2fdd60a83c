/* torchdroid host NNAPI: the subset of the NNAPI C API (NeuralNetworks.h) that
 * PyTorch's NNAPI runtime resolves with dlsym, plus a few TorchdroidNN_* entry
 * points through which the Python kernels (host_nnapi/kernels.py) read the
 * model and the execution's buffers.  Written from the public NNAPI
 * documentation; only the values torch uses are declared. */
#ifndef TORCHDROID_HOST_NN_H
#define TORCHDROID_HOST_NN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
  ANEURALNETWORKS_NO_ERROR = 0,
  ANEURALNETWORKS_OUT_OF_MEMORY = 1,
  ANEURALNETWORKS_INCOMPLETE = 2,
  ANEURALNETWORKS_UNEXPECTED_NULL = 3,
  ANEURALNETWORKS_BAD_DATA = 4,
  ANEURALNETWORKS_OP_FAILED = 5,
  ANEURALNETWORKS_BAD_STATE = 6,
  ANEURALNETWORKS_UNMAPPABLE = 7,
  ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE = 8,
  ANEURALNETWORKS_UNAVAILABLE_DEVICE = 9,
};

enum {
  ANEURALNETWORKS_FLOAT32 = 0,
  ANEURALNETWORKS_INT32 = 1,
  ANEURALNETWORKS_UINT32 = 2,
  ANEURALNETWORKS_TENSOR_FLOAT32 = 3,
  ANEURALNETWORKS_TENSOR_INT32 = 4,
  ANEURALNETWORKS_TENSOR_QUANT8_ASYMM = 5,
  ANEURALNETWORKS_BOOL = 6,
  ANEURALNETWORKS_TENSOR_QUANT16_SYMM = 7,
  ANEURALNETWORKS_TENSOR_FLOAT16 = 8,
  ANEURALNETWORKS_TENSOR_BOOL8 = 9,
  ANEURALNETWORKS_FLOAT16 = 10,
  ANEURALNETWORKS_TENSOR_QUANT8_SYMM_PER_CHANNEL = 11,
  ANEURALNETWORKS_TENSOR_QUANT16_ASYMM = 12,
};

#define ANEURALNETWORKS_MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES 128

typedef struct ANeuralNetworksOperandType {
  int32_t type;
  uint32_t dimensionCount;
  const uint32_t* dimensions;
  float scale;
  int32_t zeroPoint;
} ANeuralNetworksOperandType;

typedef int32_t ANeuralNetworksOperationType;
typedef struct ANeuralNetworksModel ANeuralNetworksModel;
typedef struct ANeuralNetworksCompilation ANeuralNetworksCompilation;
typedef struct ANeuralNetworksExecution ANeuralNetworksExecution;
typedef struct ANeuralNetworksMemory ANeuralNetworksMemory;
typedef struct ANeuralNetworksEvent ANeuralNetworksEvent;
typedef struct ANeuralNetworksDevice ANeuralNetworksDevice;

/* The executor the Python side installs: kind is one of TDNN_* below. */
enum { TDNN_PREPARE = 1, TDNN_COMPUTE = 2, TDNN_RELEASE = 3 };
typedef int (*TorchdroidNN_Executor)(int kind, void* compilation, void* execution);

/* Operand lifetimes as the Python side sees them. */
enum { TDNN_TEMPORARY = 0, TDNN_MODEL_INPUT = 1, TDNN_MODEL_OUTPUT = 2, TDNN_CONSTANT = 3, TDNN_NO_VALUE = 4 };

#endif
