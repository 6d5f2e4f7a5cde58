"""A prompt source and an engine of a user's own, each one module outside the package, named on the command line
as ``package.module:Class`` (the one registration they need), with their own settings from a suite file: the run
serves the source's prompts through the engine and the record says which parts ran with which settings."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

from conftest import run_cli, stored

TOY = textwrap.dedent(
    '''
    from dataclasses import dataclass

    from accelbench.errors import UsageError
    from accelbench.params import NoOptions, opt
    from accelbench.serve.engines.base import QueuedEngine
    from accelbench.serve.sources.base import Source, Work


    @dataclass(frozen=True)
    class RepeatedOptions(NoOptions):
        word: int = opt(7, "the token id every prompt repeats")

        def check(self) -> None:
            if self.word < 0:
                raise UsageError(f"--word must not be negative, got {self.word}")


    class Repeated(Source):
        """Every prompt one token id, repeated to the asked length."""

        name = "repeated"
        Options = RepeatedOptions

        def work(self, params, vocab, total, lengths):
            prompt_len, out = lengths
            prompts = [[self.options.word % vocab] * prompt_len for _ in range(total)]
            return Work.single(prompts, [out] * total, {"source": self.name, "word": self.options.word})


    @dataclass(frozen=True)
    class EchoOptions(NoOptions):
        echo_delay_ms: float = opt(0.0, "a pause before each batch is answered")


    class Echo(QueuedEngine):
        """Answers each request with its prompt's first token, as many times as asked: no model."""

        name = "echo"
        runs_model = False
        Options = EchoOptions

        def serve(self, batch):
            import time

            time.sleep(self.options.echo_delay_ms / 1e3)
            for r in batch:
                self.sink.first(r, r.prompt[0])
                self.sink.done(r, [r.prompt[0]] * r.max_new_tokens)
    '''
)


def test_a_users_source_and_engine_serve_a_run_from_outside_the_package(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    (tmp_path / "toy_parts.py").write_text(TOY)
    suite = tmp_path / "toy.toml"
    suite.write_text(
        textwrap.dedent(
            """
            name = "toy"
            [[benchmark]]
            name = "infer/llm"
            [benchmark.params]
            model = "llama3.1-8b"
            scale = "tiny"
            engine = "toy_parts:Echo"
            echo_delay_ms = 1.0
            source = "toy_parts:Repeated"
            word = 9
            duration = 1
            """
        )
    )
    env = cli_env | {"PYTHONPATH": os.pathsep.join([str(tmp_path), cli_env.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    db = tmp_path / "toy.db"
    done = run_cli(["run", str(suite), "--db", str(db)], env, tmp_path, process=True)
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = stored(db)
    assert record.status == "ok", record.error
    assert record.params["source"] == "toy_parts:Repeated" and record.params["word"] == 9
    assert record.params["engine"] == "toy_parts:Echo" and record.params["echo_delay_ms"] == 1.0
    assert record.details["prompts"] == {"source": "repeated", "word": 9}
    assert record.metrics["tokens_per_second"].value > 0


def test_a_users_source_setting_is_checked_by_its_own_options(tmp_path: Path, cli_env: dict[str, str]) -> None:
    (tmp_path / "toy_parts.py").write_text(TOY)
    suite = tmp_path / "bad.toml"
    suite.write_text(
        'name = "bad"\n[[benchmark]]\nname = "infer/llm"\n'
        'params = { model = "llama3.1-8b", scale = "tiny", engine = "null", source = "toy_parts:Repeated", '
        "word = -1 }\n"
    )
    env = cli_env | {"PYTHONPATH": str(tmp_path)}
    done = run_cli(["run", str(suite), "--db", str(tmp_path / "b.db")], env, tmp_path, process=True)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--word must not be negative, got -1" in done.stderr and "Traceback" not in done.stderr


def test_installed_parts_are_chosen_by_name_with_their_settings_as_flags(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    """A package that declares its engine and source in the ``accelbench.parts`` entry-point group (an installed
    distribution's ``entry_points.txt``, found on the path as pip leaves it): ``--engine echo --source repeated``
    choose them by name, their settings are flags, a bad one is refused by its own check, and ``--help`` lists
    them beside the built-ins."""
    (tmp_path / "toy_parts.py").write_text(TOY)
    info = tmp_path / "toy_parts-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-parts\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[accelbench.parts]\nengine.echo = toy_parts:Echo\nsource.repeated = toy_parts:Repeated\n"
    )
    env = cli_env | {"PYTHONPATH": str(tmp_path)}
    db = tmp_path / "i.db"
    args = ["infer", "llama3.1-8b", "--scale", "tiny", "--engine", "echo", "--echo-delay-ms", "1", "--source",
            "repeated", "--word", "11", "--duration", "1", "--db", str(db)]  # fmt: skip
    done = run_cli(args, env, tmp_path, process=True)
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = stored(db)
    assert record.status == "ok", record.error
    assert (record.params["engine"], record.params["source"], record.params["word"]) == ("echo", "repeated", 11)
    assert record.details["prompts"] == {"source": "repeated", "word": 11}
    bad = run_cli([*args[:-2], "--word", "-3", "--db", str(db)], env, tmp_path, process=True)
    assert bad.returncode == 2 and "--word must not be negative, got -3" in bad.stderr, bad.stderr
    helped = run_cli(["infer", "--help"], env | {"COLUMNS": "200"}, tmp_path, process=True)
    assert "--echo-delay-ms" in helped.stdout and "--word" in helped.stdout


def test_a_device_kind_and_a_family_are_installed_the_same_way(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """The one entry-point group holds every kind of part: a device kind (the suite's fake accelerator) and a
    family of records, each found by name in a fresh process."""
    import shutil
    import subprocess
    import sys

    shutil.copy(Path(__file__).parent / "fake_kind.py", tmp_path / "fake_kind.py")
    (tmp_path / "toy_family.py").write_text(
        "from accelbench.families import Family\nFAMILY = Family('toy', 'toy figures')\n"
    )
    info = tmp_path / "toy_parts-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-parts\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[accelbench.parts]\ndevice_kind.fakeaccel = fake_kind:KIND\nfamily.toy = toy_family:FAMILY\n"
    )
    code = (
        "from accelbench.devices.kind import by_name\nfrom accelbench.families import family_of\n"
        "print(type(by_name('fakeaccel')).__name__, family_of('toy/x').title)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=cli_env | {"PYTHONPATH": str(tmp_path)}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["FakeKind", "toy", "figures"]
