/* Stand-in for ExecuTorch's examples/portable/executor_runner (E8): gflags-style --flag=value options
 * model_path, num_executions, cpu_threads; refuses a file that is not a .pte (flatbuffer id "ET12" at
 * offset 4); prints "Iteration i of N: X ms" per execution through the PAL: stderr with the posix PAL,
 * nothing on the console with the android PAL (logcat). Work per execution scales with the file size.
 * Built with ET_EVENT_TRACER_ENABLED (EXECUTORCH_ENABLE_EVENT_TRACER=ON, EB3/EB4) it also takes
 * --etdump_path (default model.etdump) and writes a real ETDump of the program after the executions, with
 * the installed ExecuTorch runtime (etdump_writer.py), with or without the flag; each execution then costs
 * twice the work (the tracer's profiling of every execution, issue 32); without it --etdump_path is an
 * unknown flag. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

static void log_line(const char *fmt, unsigned a, unsigned b, double c) {
#ifndef FIXTURE_LOG_TO_LOGCAT
  fprintf(stderr, "I executorch:executor_runner.cpp:781] ");
  fprintf(stderr, fmt, a, b, c);
  fputc('\n', stderr);
#else
  (void)fmt; (void)a; (void)b; (void)c;
#endif
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The outputs of the program on `inputs` (NULL: all ones), printed by the installed ExecuTorch runtime. */
static int print_outputs(const char *model, const char *inputs) {
  const char *python = getenv("VDEV_PYTHON") ? getenv("VDEV_PYTHON") : "python3";
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    execlp(python, python, FIXTURE_OUTPUT_PRINTER, model, inputs ? inputs : "", (char *)NULL);
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#ifdef ET_EVENT_TRACER_ENABLED
/* The ETDump of `runs` executions of the program, by the installed ExecuTorch runtime ($VDEV_PYTHON or python3). */
static int write_etdump(const char *model, const char *path, unsigned runs) {
  char count[32];
  snprintf(count, sizeof count, "%u", runs);
  const char *python = getenv("VDEV_PYTHON") ? getenv("VDEV_PYTHON") : "python3";
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) { dup2(devnull, 1); dup2(devnull, 2); }  /* the runtime's own log lines are not the runner's */
    execlp(python, python, FIXTURE_ETDUMP_WRITER, model, path, count, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
#endif

int main(int argc, char **argv) {
  const char *model = "model.pte";
  unsigned runs = 1;
  int threads = -1;
  const char *inputs = NULL;
  int print_all = 0;
#ifdef ET_EVENT_TRACER_ENABLED
  const char *etdump_path = "model.etdump";
#endif
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--model_path=", 13) == 0) model = argv[i] + 13;
    else if (strncmp(argv[i], "--num_executions=", 17) == 0) runs = (unsigned)strtoul(argv[i] + 17, NULL, 10);
    else if (strncmp(argv[i], "--cpu_threads=", 14) == 0) threads = atoi(argv[i] + 14);
    else if (strncmp(argv[i], "--inputs=", 9) == 0) inputs = argv[i][9] ? argv[i] + 9 : NULL;
#ifdef FIXTURE_PRINT_ALL_OUTPUT_BOOL
    else if (strcmp(argv[i], "--print_all_output") == 0 || strcmp(argv[i], "--print_all_output=true") == 0) print_all = 1;
    else if (strcmp(argv[i], "--print_all_output=false") == 0) print_all = 0;
#else
    else if (strncmp(argv[i], "--print_output=", 15) == 0) {
      const char *mode = argv[i] + 15;
      if (strcmp(mode, "all") == 0) print_all = 1;
      else if (strcmp(mode, "none") == 0 || strcmp(mode, "summary") == 0) print_all = 0;
      else {
        fprintf(stderr, "E executorch:executor_runner.cpp:324] Unknown --print_output mode '%s'. Expected 'none', "
                        "'summary', or 'all'.\n", mode);
        return 1;
      }
    }
#endif
#ifdef ET_EVENT_TRACER_ENABLED
    else if (strncmp(argv[i], "--etdump_path=", 14) == 0) etdump_path = argv[i] + 14;
#endif
    else { fprintf(stderr, "ERROR: unknown command line flag '%s'\n", argv[i]); return 1; }
  }
  FILE *f = fopen(model, "rb");
  if (!f) { fprintf(stderr, "E executorch:executor_runner.cpp] Failed to open %s\n", model); return 1; }
  static unsigned char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  if (n < 8 || memcmp(buf + 4, "ET12", 4) != 0) {
    fprintf(stderr, "E executorch:program.cpp] Program identifier 'ET12' not found in %s\n", model);
    return 1;
  }
  if (inputs) {  /* upstream reads every input file before the executions (load_input_files, ET_CHECK_MSG) */
    char list[4096];
    snprintf(list, sizeof list, "%s", inputs);
    for (char *path = strtok(list, ","); path; path = strtok(NULL, ",")) {
      FILE *in = fopen(path, "rb");
      if (!in) {
        fprintf(stderr, "E executorch:executor_runner.cpp:156] Failed to open input file: %s\n", path);
        fprintf(stderr, "F executorch:executor_runner.cpp:405] Could not load inputs: 0x22\n");
        abort();
      }
      fclose(in);
    }
  }
  fprintf(stderr, "I executorch:executor_runner.cpp] Resetting threadpool with num threads = %d\n", threads);
  double total = 0;
  for (unsigned r = 1; r <= runs; r++) {
    double t0 = now_ms();
    volatile unsigned long acc = 0;
    for (size_t k = 0; k < n * 20; k++) acc += buf[k % n] * (k | 1);
#ifdef ET_EVENT_TRACER_ENABLED
    for (size_t k = 0; k < n * 20; k++) acc += buf[k % n] * (k | 3);  /* the tracer's overhead */
#endif
    double dt = now_ms() - t0;
    total += dt;
    log_line("Iteration %u of %u: %f ms", r, runs, dt);
  }
#ifndef FIXTURE_LOG_TO_LOGCAT
  fprintf(stderr, "I executorch:executor_runner.cpp:791] Model executed successfully %u time(s) in %f ms.\n", runs, total);
#endif
  if (print_all && print_outputs(model, inputs) != 0) {
    fprintf(stderr, "F executorch:executor_runner.cpp:751] Could not prepare inputs: 0x12\n");
    abort();  /* ET_CHECK_MSG on prepare_input_tensors / execute */
  }
#ifdef ET_EVENT_TRACER_ENABLED
  if (write_etdump(model, etdump_path, runs) != 0) {
    fprintf(stderr, "E executorch:executor_runner.cpp:871] Failed to save ETDump file.\n");
    abort();  /* ET_CHECK_MSG */
  }
#endif
  return 0;
}
