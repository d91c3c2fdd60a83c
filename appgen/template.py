"""The cookiecutter tool: find the app template, verify it, render it with a context."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Dict

from toolchain.errors import ToolFailed, ToolNotFound, UsageError

log = logging.getLogger(__name__)

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates" / "android_app"
PROJECT_KEY = "project_dir"


class AppTemplate:
    """``templates/android_app``: a cookiecutter template of a complete Gradle project."""

    def __init__(self, path: Path, variables: Dict[str, Any]):
        self.path = Path(path)
        self.variables = variables

    @classmethod
    def locate(cls, path: Path = TEMPLATE_DIR) -> "AppTemplate":
        path = Path(path)
        spec = path / "cookiecutter.json"
        if not spec.is_file():
            raise ToolNotFound(f"the app template is missing: no {spec}",
                               remedy="restore templates/android_app from the torchdroid sources (git checkout)")
        try:
            variables = json.loads(spec.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise ToolFailed(f"the app template's {spec} cannot be read", cause=str(e),
                             remedy="restore it with git checkout") from e
        tmpl = cls(path, variables)
        tmpl.verify()
        return tmpl

    def verify(self) -> None:
        try:
            import cookiecutter  # noqa: F401
        except ImportError as e:
            raise ToolNotFound("cookiecutter is not installed", cause=str(e),
                               remedy="pip install 'cookiecutter>=2.5' (it is in pyproject.toml)") from e
        if PROJECT_KEY not in self.variables:
            raise ToolFailed(f"{self.path}/cookiecutter.json has no {PROJECT_KEY!r} variable",
                             remedy="restore the template with git checkout")

    def digest(self) -> str:
        """sha256 over every template file's path and bytes: a changed template makes apps out of date."""
        h = hashlib.sha256()
        for f in sorted(p for p in self.path.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            h.update(f.relative_to(self.path).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
        return h.hexdigest()

    def render(self, context: Dict[str, Any], output_dir: Path, work_dir: Path) -> Path:
        """Render into ``output_dir/<project_dir>`` and return that directory.

        Every context key must be a template variable (a typo would otherwise be
        silently ignored), and every value a plain string (lists would become
        cookiecutter choices).
        """
        from cookiecutter.exceptions import CookiecutterException, UndefinedVariableInTemplate
        from cookiecutter.main import cookiecutter
        from jinja2 import TemplateError, TemplateSyntaxError

        unknown = sorted(k for k in context if k not in self.variables)
        if unknown:
            raise UsageError(f"the app template has no variables {', '.join(unknown)}",
                             remedy=f"known variables: {', '.join(k for k in self.variables if not k.startswith('_'))}")
        ctx = {k: str(v) for k, v in context.items()}
        work_dir = Path(work_dir)
        try:
            out = cookiecutter(
                str(self.path),
                no_input=True,
                extra_context=ctx,
                output_dir=str(output_dir),
                default_config={"replay_dir": str(work_dir / "replay"), "cookiecutters_dir": str(work_dir / "cc")},
                accept_hooks=False,
            )
        except UndefinedVariableInTemplate as e:
            raise ToolFailed(
                f"the app template uses an undefined value: {e.error.message}",
                cause=f"template {self.path}",
                remedy="fix the template (every {{ cookiecutter.x }} must be in cookiecutter.json)",
            ) from e
        except TemplateSyntaxError as e:
            where = f"{e.filename or e.name or '?'}:{e.lineno}"
            raise ToolFailed(f"the app template has a syntax error at {where}: {e.message}",
                             cause=f"template {self.path}",
                             remedy="fix that line of the template (git diff templates/ shows local edits)") from e
        except (TemplateError, CookiecutterException, ValueError) as e:
            raise ToolFailed(f"rendering the app template failed: {type(e).__name__}: {e}",
                             cause=f"template {self.path}",
                             remedy="fix the template or the value named above") from e
        log.debug("rendered %s into %s", self.path, out)
        return Path(out)
