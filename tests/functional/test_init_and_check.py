"""`jobkit init` writes all of a jobs project or nothing; `jobkit template --check`
imports every class from the code a runner ships; `sam build`'s runner copy ships only that."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from jobkit.cli import main
from jobkit.declaration.config import load_declaration
from jobkit.sam.runner import build_runner


def jobkit(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "shop"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def test_init_writes_the_project(app: Path) -> None:
    result = jobkit("init")
    assert result.exit_code == 0, result.output
    assert files_under(app) == {
        "infra/jobs.toml",
        "infra/sam/Makefile",
        "jobs/__init__.py",
        "jobs/welcome_email.py",
        "tests/test_jobs.py",
        "pytest.ini",
        "template.yaml",
        "JOBS.md",
    }
    assert load_declaration(app / "infra" / "jobs.toml").prefix == "shop"


@pytest.mark.parametrize(
    ("prepare", "args", "message"),
    [
        (lambda root: (root / "JOBS.md").write_text("ours"), [], "not overwriting JOBS.md"),
        (lambda root: (root / "template.yaml").write_text("ours"), [], "not overwriting"),
        (lambda root: (root / "jobs").mkdir(), [], "jobs/ exists already"),
        (lambda root: None, ["--prefix", "bad prefix!"], "--prefix 'bad prefix!' must match"),
        (lambda root: None, ["--package", "json"], "would shadow the module 'json'"),
        (lambda root: None, ["--package", "jobkit.jobs"], "would shadow the module 'jobkit'"),
        (lambda root: None, ["--package", "my-jobs"], "is not a Python package name"),
        (lambda root: None, ["--template", "../t.yaml"], "must be a path inside the directory"),
        (lambda root: (root / "tests").write_text("a file"), [], "nothing was created"),
        (
            lambda root: (root / "infra").mkdir() or (root / "infra" / "template-extra.yaml").write_text("[: nope"),
            [],
            "template-extra.yaml",
        ),
    ],
)
def test_init_writes_nothing_when_it_cannot_write_everything(app: Path, prepare, args, message) -> None:  # type: ignore[no-untyped-def]
    prepare(app)
    before = files_under(app)
    result = jobkit("init", *args)
    assert result.exit_code == 1, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert files_under(app) == before
    assert not (app / "jobs").exists() or "jobs/ exists" in message


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-q'\n"),
        (".pytest.ini", "[pytest]\n"),
        ("pytest.toml", "[pytest]\n"),
        ("setup.cfg", "[tool:pytest]\n"),
        ("tox.ini", "[pytest]\n"),
    ],
)
def test_init_leaves_an_existing_pytest_configuration_alone(app: Path, name: str, text: str) -> None:
    (app / name).write_text(text)
    result = jobkit("init")
    assert result.exit_code == 0, result.output
    assert not (app / "pytest.ini").exists()
    assert f"not changed: {name}" in result.output and "jobkit_config" in result.output
    assert "pythonpath" in result.output
    assert (app / name).read_text() == text


def test_a_template_named_at_init_is_the_one_jobkit_template_rewrites(app: Path) -> None:
    assert jobkit("init", "--template", "deploy/jobs-template.yaml").exit_code == 0
    assert not (app / "template.yaml").exists()
    with (app / "infra" / "jobs.toml").open("a") as declaration:
        declaration.write('\n[types.other]\nclass = "jobs.welcome_email:WelcomeEmailJob"\n')
    stale = jobkit("template", "--check")
    assert stale.exit_code == 1 and "deploy/jobs-template.yaml" in stale.output and "stale" in stale.output
    assert jobkit("template").exit_code == 0
    assert "OtherRunner" in (app / "deploy" / "jobs-template.yaml").read_text()
    assert not (app / "template.yaml").exists()
    assert jobkit("template", "--check").exit_code == 0


@pytest.mark.parametrize(
    ("module", "message"),
    [
        (
            "from settings import SECRET\nfrom jobkit import Job\nclass SibJob(Job):\n    pass\n",
            "No module named 'settings'",
        ),
        ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
        ("def broken(:\n", "SyntaxError"),
        ("from jobkit import Job\n", "has no attribute 'SibJob'"),
        ("class SibJob:\n    pass\n", "is not a subclass of jobkit.Job"),
    ],
)
def test_check_imports_each_class_from_the_code_a_runner_ships(app: Path, module: str, message: str) -> None:
    assert jobkit("init").exit_code == 0
    (app / "settings.py").write_text("SECRET = 1\n")  # importable here, but not shipped: not in a job package
    (app / "jobs" / "sib.py").write_text(module)
    with (app / "infra" / "jobs.toml").open("a") as declaration:
        declaration.write('\n[types.sib]\nclass = "jobs.sib:SibJob"\n')
    assert jobkit("template").exit_code == 0
    result = jobkit("template", "--check")
    assert result.exit_code == 1, result.output
    assert "types.sib.class" in result.output and message in result.output, result.output
    assert "Traceback" not in result.output


def test_a_missing_template_is_named_as_missing(app: Path) -> None:
    assert jobkit("init").exit_code == 0
    (app / "template.yaml").unlink()
    result = jobkit("template", "--check")
    assert result.exit_code == 1 and "template.yaml not found" in result.output


def test_the_runner_ships_the_job_package_without_dotfiles_or_links(app: Path, tmp_path: Path) -> None:
    assert jobkit("init").exit_code == 0
    (app / "jobs" / ".env").write_text("SECRET=1\n")
    (app / "jobs" / "templates").mkdir()
    (app / "jobs" / "templates" / "welcome.txt").write_text("Hello {name}\n")
    (app / "jobs" / "passwd").symlink_to("/etc/passwd")
    (app / ".env").write_text("SECRET=1\n")
    (app / "settings.py").write_text("")
    out = tmp_path / "artifacts"
    assert build_runner(load_declaration(app / "infra" / "jobs.toml"), out) == ["jobs"]
    assert files_under(out) == {"jobs/__init__.py", "jobs/welcome_email.py", "jobs/templates/welcome.txt"}


def test_job_requirements_leave_out_what_the_runtime_and_the_layer_provide(app: Path, tmp_path: Path) -> None:
    from jobkit.sam.layer import BuildError

    assert jobkit("init").exit_code == 0
    declaration = app / "infra" / "jobs.toml"
    declaration.write_text(declaration.read_text().replace("# requirements = ", "requirements = "))
    requirements = app / "infra" / "jobs-requirements.txt"
    requirements.write_text("requests==2.32.3\n")  # needs urllib3, which the runtime has (with botocore)
    out = tmp_path / "artifacts"
    build_runner(load_declaration(declaration), out)
    shipped = {p.name for p in out.iterdir()}
    assert {"jobs", "requests", "idna", "certifi"} <= shipped
    assert not shipped & {"urllib3", "botocore", "boto3", "aws_lambda_powertools", "jobkit"}
    requirements.write_text("aws-lambda-powertools==3.0.0\n")  # the layer carries the installed version
    with pytest.raises(BuildError, match="the jobkit layer carries"):
        build_runner(load_declaration(declaration), tmp_path / "again")


def test_a_traced_type_s_runner_carries_the_xray_sdk_at_the_version_tested_here(app: Path, tmp_path: Path) -> None:
    import importlib.metadata

    assert jobkit("init").exit_code == 0
    declaration = app / "infra" / "jobs.toml"
    text = declaration.read_text()
    out = tmp_path / "untraced"
    build_runner(load_declaration(declaration), out)
    assert {p.name for p in out.iterdir()} == {"jobs"}  # no requirements, no tracing: the code only

    declaration.write_text(text.replace("[types.welcomeEmail]\n", "[types.welcomeEmail]\ntracing = true\n"))
    out = tmp_path / "traced"
    build_runner(load_declaration(declaration), out)
    version = importlib.metadata.version("aws-xray-sdk")
    assert (out / f"aws_xray_sdk-{version}.dist-info").is_dir()
    assert (out / "wrapt").is_dir()  # and what it needs, for the Lambda runtime
    assert not {p.name for p in out.iterdir()} & {"botocore", "aws_lambda_powertools", "jobkit"}


def test_a_traced_type_without_the_xray_sdk_installed_fails_the_build_naming_the_extra(
    app: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobkit.sam import runner
    from jobkit.sam.layer import BuildError

    assert jobkit("init").exit_code == 0
    declaration = app / "infra" / "jobs.toml"
    declaration.write_text(
        declaration.read_text().replace("[types.welcomeEmail]\n", "[types.welcomeEmail]\ntracing = true\n")
    )
    monkeypatch.setattr(runner, "TRACING_DISTRIBUTION", "aws-xray-sdk-absent")  # as on a machine without it
    with pytest.raises(BuildError, match=r"types\.welcomeEmail has tracing = true.*jobkit-aws\[tracing\]"):
        build_runner(load_declaration(declaration), tmp_path / "out")
