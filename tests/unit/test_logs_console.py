"""The console shows torchdroid's lines and everybody's warnings; upstream INFO and C++ output go to the run log."""

import logging
import os

from toolchain.logs import native_output_to_log, setup_logging


def test_upstream_info_goes_to_the_log_only(tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("CI", "1")
    path = setup_logging(tmp_path, "unit")
    try:
        logging.getLogger().info("    aten.mean.dim")  # what ExecuTorch's partitioner logs on the root logger
        logging.getLogger("executorch.exir").info("lowering detail")
        logging.getLogger("executorch.exir").warning("upstream warning")
        logging.getLogger("converter.pte_host").info("our progress")
        with native_output_to_log():
            os.write(2, b"[threadpool.cpp:66] Resetting threadpool to 1 threads.\n")  # a C++ library's line
            logging.getLogger("converter.pte_host").info("our line while native output is redirected")
        err = capfd.readouterr().err
    finally:
        setup_logging(tmp_path, "unit-reset")
    assert "our progress" in err and "upstream warning" in err and "while native output" in err
    assert "aten.mean.dim" not in err and "lowering detail" not in err and "threadpool.cpp" not in err
    log = path.read_text()
    assert "aten.mean.dim" in log and "lowering detail" in log and "threadpool.cpp" in log
