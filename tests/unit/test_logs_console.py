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
        logging.getLogger("converter.executorch_check").info("our progress")
        with native_output_to_log():
            os.write(2, b"[threadpool.cpp:66] Resetting threadpool to 1 threads.\n")  # a C++ library's line
            logging.getLogger("converter.executorch_check").info("our line while native output is redirected")
        err = capfd.readouterr().err
    finally:
        setup_logging(tmp_path, "unit-reset")
    assert "our progress" in err and "upstream warning" in err and "while native output" in err
    assert "aten.mean.dim" not in err and "lowering detail" not in err and "threadpool.cpp" not in err
    log = path.read_text()
    assert "aten.mean.dim" in log and "lowering detail" in log and "threadpool.cpp" in log


def test_a_log_file_on_a_full_disk_is_said_once_not_a_logging_traceback_per_line(tmp_path, capfd, monkeypatch):
    import errno

    monkeypatch.setenv("CI", "1")
    setup_logging(tmp_path, "probe")
    fh = next(h for h in logging.getLogger().handlers  # ours, not pytest's own log-file handler
              if isinstance(h, logging.FileHandler) and getattr(h, "_torchdroid_handler", False))

    class Full:
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fh, "stream", Full())
    log = logging.getLogger("toolchain.test")
    log.info("first line")
    log.info("second line")
    err = capfd.readouterr().err
    assert "Logging error" not in err and "Traceback" not in err, err
    assert err.count("cannot be written any more") == 1, err
    assert "first line" in err and "second line" in err  # the console keeps the messages
