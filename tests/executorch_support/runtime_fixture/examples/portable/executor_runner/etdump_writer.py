"""The fixture runner's ETDump, written by the installed ExecuTorch runtime (test-only).

    python etdump_writer.py PROGRAM ETDUMP_PATH EXECUTIONS

Runs PROGRAM's forward EXECUTIONS times on an all-ones input of its declared shape (what executor_runner does
without --inputs) with ETDump enabled, and writes the ETDump to ETDUMP_PATH.  Exits non-zero when the program
cannot be loaded (a stand-in .pte of the other tests): the fixture runner then fails like upstream's
``ET_CHECK_MSG(status == Error::Ok, "Failed to save ETDump file.")``.
"""

import sys


def main(argv):
    program, etdump, runs = argv[1], argv[2], int(argv[3])
    import torch
    from executorch.extension.pybindings import portable_lib

    module = portable_lib._load_for_executorch(program, enable_etdump=True)
    meta = module.method_meta("forward")
    inputs = [torch.ones(tuple(meta.input_tensor_meta(i).sizes())) for i in range(meta.num_inputs())]
    for _ in range(max(1, runs)):
        module.forward(inputs)
    module.write_etdump_result_to_file(etdump)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
