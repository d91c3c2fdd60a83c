"""Nothing of the user's is lost (issue 21 item 1), as a user runs the real `invoke`: a build dir that is the
user's own project, a checkout holding their patch, `make-app --out '~' --force`, a page beside report's PNG."""

from __future__ import annotations

import os
import shutil
import subprocess

from tests.adversarial.harness import adversarial, assert_clean, run_invoke, snapshot
from tests.appgen_support.models import tiny_models


@adversarial("clean", "not torchdroid's")
def test_clean_with_the_build_dir_at_the_users_project_removes_nothing(tmp_path):
    project = tmp_path / "project"
    for rel in ("models/net.pt", "app/Main.java", "src/lib/a.c", "results/table.csv"):
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(rel)
    kept = snapshot([project])
    out = run_invoke(["clean", "--what", "outputs,caches,results"], tmp_path, env={"INVOKE_BUILD_DIR": str(project)})
    assert_clean(out, "usage", mentions=["refusing", "did not write", "nothing was removed"], kept=kept, root=tmp_path)


@adversarial("clean", "user's changes")
def test_clean_caches_keeps_a_checkout_with_an_uncommitted_patch(tmp_path):
    repo = tmp_path / "build" / "src" / "pytorch-0123456789ab"
    repo.mkdir(parents=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "pin"]):
        if args[0] == "add":
            (repo / "CMakeLists.txt").write_text("upstream\n")
        subprocess.run(["git", *args], cwd=repo, check=True, env=env, capture_output=True)
    (repo / "CMakeLists.txt").write_text("my patch\n")
    kept = snapshot([repo / "CMakeLists.txt"])
    out = run_invoke(["clean", "--what", "caches"], tmp_path)
    assert_clean(out, "usage", mentions=["local changes", "CMakeLists.txt", "stash"], kept=kept, root=tmp_path)


@adversarial("make-app", "protected path")
def test_make_app_out_tilde_force_never_replaces_home(tmp_path):
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "thesis.tex").write_text("years of work")
    work = home / "w"
    shutil.copytree(tiny_models(), work / "build" / "models")
    kept = snapshot([home / "Documents"])
    out = run_invoke(["make-app", "--out", "~", "--force"], work, env={"HOME": str(home)})
    assert_clean(out, "usage", mentions=["refusing", "home directory"], kept=kept, root=work)
    assert sorted(p.name for p in home.iterdir()) == ["Documents", "w"]


@adversarial("clean", "user's files in an owned directory (issue 34)")
def test_clean_outputs_keeps_and_names_the_users_notes_and_edits_in_the_app(tmp_path):
    """Ownership per file: clean removes the app's files torchdroid wrote and still has as it wrote them; a NOTES.txt
    the user put there and a file they edited stay, named by -n and by the clean itself."""
    shutil.copytree(tiny_models(), tmp_path / "build" / "models")
    assert run_invoke(["make-app"], tmp_path).code == 0
    app = tmp_path / "build" / "app"
    (app / "NOTES.txt").write_text("my notes")
    (app / "app/src/main/assets/labels.txt").write_text("my labels\n")
    kept = snapshot([app / "NOTES.txt", app / "app/src/main/assets/labels.txt"])
    preview = run_invoke(["clean", "--what", "outputs", "-n"], tmp_path)
    assert_clean(preview, "ok", mentions=["would keep", "NOTES.txt (not written by torchdroid)",
                                          "labels.txt (changed since torchdroid wrote it)"], kept=kept, root=tmp_path)
    assert (app / "gradlew").is_file()
    out = run_invoke(["clean", "--what", "outputs"], tmp_path)
    assert_clean(out, "ok", mentions=["keeping", "NOTES.txt"], kept=kept, root=tmp_path)
    assert not (app / "gradlew").exists() and not (app / "torchdroid-app.json").exists()


@adversarial("make-app", "another task's directory (issue 34)")
def test_make_app_into_the_results_directory_is_refused_even_with_force(tmp_path):
    from tests.adversarial.test_fs_faults import _results

    shutil.copytree(tiny_models(), tmp_path / "build" / "models")
    (tmp_path / "history").mkdir()
    results = shutil.move(_results(tmp_path / "history"), tmp_path / "build" / "results")
    kept = snapshot([results])
    out = run_invoke(["make-app", "--model", "quant_none", "--out", "build/results", "--force"], tmp_path)
    assert_clean(out, "usage", mentions=["build/results", "invoke deploy"], kept=kept, root=tmp_path)
