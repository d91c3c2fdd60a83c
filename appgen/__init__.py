"""make-app and build-app: a Gradle Android app around one converted variant.

``make_app`` renders ``templates/android_app/`` (a cookiecutter template whose
Jinja only fills values) with the variant's CPU and NNAPI models, ImageNet
labels, a sample image and, for ``quant_full``, a uint8 app-facing model plus a
lookup table; ``build_app`` runs ``./gradlew assembleDebug`` when an Android SDK
and the wrapper jar exist.  torch is imported only inside the functions that
need it.
"""

from .build_apk import BuildAppResult, BuildAppSettings, build_app
from .make import AppSettings, MakeAppResult, make_app

__all__ = ["AppSettings", "BuildAppResult", "BuildAppSettings", "MakeAppResult", "build_app", "make_app"]
