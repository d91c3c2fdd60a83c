/*
 * Host-compiled stand-in for PyTorch's binaries/speed_benchmark_torch (test-only).
 *
 * It loads nothing: it checks that --model names a readable file and prints
 * upstream's output format, including one "PyTorchObserver" line per timed
 * iteration with --report_pep=true.  Latencies are synthetic:
 *   SBT_CPU_US / SBT_NNAPI_US   base latency in microseconds (model path containing "nnapi" uses the latter)
 *   SBT_CRASH=substr           crash with SIGSEGV (after "Main runs.") when the model path contains substr
 *   SBT_GARBAGE=substr         exit 0 printing nothing parseable when the model path contains substr
 *   SBT_HOLD_MS=ms             take at least this long per run (sleeps)
 *   SBT_TRACE=path             append "start_ns end_ns model" per run to path (a host file)
 *   SBT_OUTPUT_CMD=command     with --print_output=true: run `command MODEL BUNDLED_INDEX` (a real program that
 *                              computes the model's output and prints it as ATen does, print_output.py) before
 *                              "Starting benchmark.", as upstream prints the output first; its failure aborts
 *                              like a model that cannot run.  Unset: nothing is printed (a phone that says nothing)
 * Like upstream's 2.7.1 release it refuses a command line of fewer than 5 arguments (docs/facts.md LI1):
 * "Insufficient command-line flags!" on stderr, exit 1, before anything else.
 * Without --use_bundled_input (or with a negative one) it checks --input_dims/--input_type/--input_memory_format
 * as upstream's create_inputs does (docs/facts.md LI1): each split at ';' into one item per input, the three
 * counts equal (the memory format defaults to one "contiguous_format"), types float/uint8_t/int64,
 * channels_last on 4-D inputs only; a failed check aborts with upstream's message.
 *   SBT_NNAPI_LOG_CMD=command  when loading a model whose path contains "nnapi": run `command MODEL PID` (the
 *                              phone's NNAPI runtime logging its compilation to logcat for this process,
 *                              nnapi_runtime_log.py), as the real runtime compiles the model in the process
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *flag(int argc, char **argv, const char *name, const char *dflt) {
  size_t n = strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--", 2) == 0 && strncmp(argv[i] + 2, name, n) == 0) {
      if (argv[i][2 + n] == '=') return argv[i] + 3 + n;
      if (argv[i][2 + n] == '\0') return "true";
    }
  }
  return dflt;
}

static int matches(const char *env, const char *model) {
  const char *v = getenv(env);
  return v && *v && strstr(model, v) != NULL;
}

static int items(const char *list, char out[][256], int max) {
  int n = 0;
  const char *p = list;
  while (*p && n < max) {
    const char *end = strchr(p, ';');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > 0 && len < 256) {
      memcpy(out[n], p, len);
      out[n++][len] = '\0';
    }
    if (!end) break;
    p = end + 1;
  }
  return n;
}

static void enforce(int ok, const char *what, const char *item) {
  if (ok) return;
  fprintf(stderr, "terminate called after throwing an instance of 'c10::Error'\n");
  fprintf(stderr, "  what():  %s%s\n", what, item ? item : "");
  fflush(stderr);
  abort();
}

static void check_inputs(int argc, char **argv) {
  const char *nf = flag(argc, argv, "no_inputs", "false");
  if (strcmp(nf, "true") == 0 || strcmp(nf, "1") == 0 || atoi(flag(argc, argv, "use_bundled_input", "-1")) >= 0)
    return;
  static char dims[16][256], types[16][256], formats[16][256];
  int n = items(flag(argc, argv, "input_dims", ""), dims, 16);
  enforce(items(flag(argc, argv, "input_type", ""), types, 16) == n,
          "Input dims and type should have the same number of items.", NULL);
  enforce(items(flag(argc, argv, "input_memory_format", "contiguous_format"), formats, 16) == n,
          "Input dims and format should have the same number of items.", NULL);
  for (int i = 0; i < n; ++i) {
    enforce(strcmp(types[i], "float") == 0 || strcmp(types[i], "uint8_t") == 0 || strcmp(types[i], "int64") == 0,
            "Unsupported input type: ", types[i]);
    int rank = 1;
    for (const char *c = dims[i]; *c; ++c) rank += *c == ',';
    if (strcmp(formats[i], "channels_last") == 0)
      enforce(rank == 4, "channels_last memory format only available on 4D tensors!", NULL);
    else
      enforce(strcmp(formats[i], "contiguous_format") == 0, "Unsupported input memory format: ", formats[i]);
  }
}

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
  long long started = now_ns();
  if (argc < 5) {
    fprintf(stderr, "Insufficient command-line flags!\n");
    return 1;
  }
  const char *model = flag(argc, argv, "model", "");
  int warmup = atoi(flag(argc, argv, "warmup", "0"));
  int iters = atoi(flag(argc, argv, "iter", "10"));
  const char *pep = flag(argc, argv, "report_pep", "false");
  int report_pep = strcmp(pep, "true") == 0 || strcmp(pep, "1") == 0;
  check_inputs(argc, argv); /* upstream makes its inputs before loading the model */
  FILE *f = fopen(model, "rb");
  if (!f) {
    fprintf(stderr, "terminate called after throwing an instance of 'c10::Error'\n");
    fprintf(stderr, "  what():  open file failed, file path: %s\n", model);
    fflush(stderr);
    abort();
  }
  fclose(f);
  const char *nnapi_log = getenv("SBT_NNAPI_LOG_CMD");
  if (strstr(model, "nnapi") != NULL && nnapi_log && *nnapi_log) {
    char pid_text[32];
    snprintf(pid_text, sizeof pid_text, "%d", (int)getpid());
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
      char script[4096];
      snprintf(script, sizeof script, "%s \"$0\" \"$1\"", nnapi_log);
      execl("/bin/sh", "sh", "-c", script, model, pid_text, (char *)NULL);
      _exit(127);
    }
    int status = 0;
    if (child > 0) waitpid(child, &status, 0);
  }
  if (matches("SBT_GARBAGE", model)) {
    printf("W/libc: unexpected state, nothing measured\n");
    return 0;
  }
  const char *print_output = flag(argc, argv, "print_output", "false");
  const char *output_cmd = getenv("SBT_OUTPUT_CMD");
  if ((strcmp(print_output, "true") == 0 || strcmp(print_output, "1") == 0) && output_cmd && *output_cmd) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      char script[4096];
      snprintf(script, sizeof script, "%s \"$0\" \"$1\"", output_cmd);
      execl("/bin/sh", "sh", "-c", script, model, flag(argc, argv, "use_bundled_input", "0"), (char *)NULL);
      _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "terminate called after throwing an instance of 'c10::Error'\n");
      fflush(stderr);
      abort();
    }
  }
  int nnapi = strstr(model, "nnapi") != NULL;
  const char *base_s = getenv(nnapi ? "SBT_NNAPI_US" : "SBT_CPU_US");
  double base = base_s ? atof(base_s) : (nnapi ? 9000.0 : 12000.0);
  printf("Starting benchmark.\n");
  printf("Running warmup runs.\n");
  if (warmup < 0) {
    fprintf(stderr, "Number of warm up runs should be non negative, provided %d.\n", warmup);
    return 1;
  }
  printf("Main runs.\n");
  fflush(stdout);
  if (matches("SBT_CRASH", model)) {
    raise(SIGSEGV);
  }
  unsigned long long seed = 88172645463325252ULL ^ (unsigned long long)strlen(model);
  double total = 0;
  for (int i = 0; i < iters; ++i) {
    seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
    float t = (float)(int)(base * (0.97 + 0.10 * (double)(seed % 1000) / 1000.0));
    total += t;
    if (report_pep) {
      /* std::cout << float prints with 6 significant digits, e.g. 1.23457e+06 */
      printf("PyTorchObserver {\"type\": \"NET\", \"unit\": \"us\", \"metric\": \"latency\", \"value\": \"%g\"}\n", t);
    }
  }
  const char *hold = getenv("SBT_HOLD_MS");
  if (hold && *hold) {
    struct timespec ts = {atoi(hold) / 1000, (long)(atoi(hold) % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  const char *trace = getenv("SBT_TRACE");
  if (trace && *trace) {
    FILE *t = fopen(trace, "a");
    if (t) {
      fprintf(t, "%lld %lld %s\n", started, now_ns(), model);
      fclose(t);
    }
  }
  double per = iters ? total / iters : 0;
  printf("Main run finished. Microseconds per iter: %g. Iters per second: %g\n", per, per > 0 ? 1e6 / per : 0);
  return 0;
}
