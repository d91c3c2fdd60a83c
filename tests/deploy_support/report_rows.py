"""Result rows and a convert manifest for the report's tests (deploy rows, failed and skipped ones, flags)."""

from __future__ import annotations

from pathlib import Path

from toolchain.records import ConvertManifest, ResultRow

LONG = ("device C is 'unauthorized', not ready for adb: accept the RSA key prompt on the phone "
        "(Settings > Developer options > USB debugging), then run invoke deploy again")


def row(serial, backend, status, median=None, reason="", source="binary", mode="full", flags="", stem="mobilenetv2"):
    ok = status == "ok"
    return ResultRow(serial=serial, device_model=f"Phone {serial}", board="b", release="11", sdk=30, abi="arm64-v8a",
                     stem=stem if source != "deploy" else "", variant=f"quant_{mode}",
                     mode=mode if source != "deploy" else "", backend=backend if source != "deploy" else "",
                     source=source, status=status, model_file=f"{stem}-quant_{mode}-{backend}.pt",
                     median_ms=median, p90_ms=median * 1.1 if ok else None, min_ms=median * 0.9 if ok else None,
                     spread_pct=2.0 if ok else None, samples=200 if ok else 0, reason=reason, flags=flags)


def manifest(tmp_path: Path, origin: str = "random") -> Path:
    weights = {"origin": origin, "seed": 0, "note": "explicitly random (untrained): predictions are meaningless"} \
        if origin == "random" else {"origin": origin, "tag": "MobileNet_V2_QuantizedWeights.IMAGENET1K_QNNPACK_V1"}
    models = tmp_path / "models"
    models.mkdir()
    ConvertManifest(models / "manifest.json", {"conversions": {"mobilenetv2": {
        "weights": weights, "converted": "2026-01-01T00:00:00+00:00"}}, "files": []}).write()
    return models
