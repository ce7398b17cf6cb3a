"""README's quick start runs as written: at most 12 commands to the first answer, each of them a command that exists
with the flags it uses (the program's own parsed by its own parser, `pulumi`'s and `gcloud`'s against the table of
their documented commands below), and nothing a first `up` needs left to another page: every placeholder of the dev
stack file filled, the state, the weights bucket, the APIs, AI zones and the stack's key made by the bootstrap, the
long run's advice before the long run, the weights download set in its place, the virtualenv said where it is needed.
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path

import pytest

from components.__main__ import COMMANDS
from components.bootstrap import Bootstrap, state_url
from components.cli import bootstrap as bootstrap_cli
from components.cli.plan import stack_config
from tests.harness import declare, stack_run
from tests.stack_config import ROOT, placeholders

MAX_COMMANDS = 12

# The `pulumi` commands and flags the quick start may use, as the CLI's reference documents them
# (https://www.pulumi.com/docs/iac/cli/commands/pulumi_<command>/, e.g. .../pulumi_config_set/; generated from the
# CLI, v3.2xx): a subcommand path -> its own flags and whether it takes positional arguments. Global flags
# (`--stack` on stack-scoped commands, `--cwd`) are listed where used.
PULUMI: dict[tuple[str, ...], tuple[set[str], bool]] = {
    ("login",): ({"--local", "--cloud-url", "--default-org"}, True),  # pulumi_login: `pulumi login [<url>]`
    ("install",): ({"--reinstall", "--no-plugins", "--no-dependencies"}, False),  # pulumi_install
    ("up",): ({"--yes", "--stack", "--diff", "--skip-preview", "--policy-pack", "--refresh"}, False),  # pulumi_up
    ("preview",): ({"--stack", "--diff", "--policy-pack", "--refresh"}, False),  # pulumi_preview
    ("config", "set"): ({"--path", "--secret", "--plaintext", "--stack"}, True),  # pulumi_config_set
    ("stack", "output"): ({"--json", "--show-secrets", "--shell", "--stack"}, True),  # pulumi_stack_output
    ("stack", "init"): ({"--secrets-provider", "--copy-config-from", "--stack"}, True),  # pulumi_stack_init
    ("stack", "select"): ({"--create", "--secrets-provider", "--stack"}, True),  # pulumi_stack_select
    ("stack", "change-secrets-provider"): ({"--stack"}, True),  # pulumi_stack_change-secrets-provider
}
# `gcloud` likewise (https://cloud.google.com/sdk/gcloud/reference/<group>/<command>): auth login's --update-adc writes
# the credentials to Application Default Credentials too (reference/auth/login); components install (reference/
# components/install).
GCLOUD: dict[tuple[str, ...], tuple[set[str], bool]] = {
    ("auth", "login"): ({"--update-adc", "--no-launch-browser", "--brief"}, True),
    ("components", "install"): ({"--quiet"}, True),
}
# What the shell and Python provide; each file a command names must exist.
SHELL = {"python3", "source", "eval"}


def section() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("## Quick start", 1)[1].split("\n## ", 1)[0]


def blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, re.S)


def commands(block: str, nested: bool = True) -> list[str]:
    """The commands of a block: comments dropped, continuation lines joined, `&&` chains split; with `nested`, each
    command substitution `$(...)` too, as a command of its own (to check; the user types it inside its `eval`)."""
    text = re.sub(r"\\\n\s*", " ", block)
    out = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        for part in filter(None, (p.strip() for p in re.split(r"&&|\|\||;|\|", line))):
            part = re.sub(r"\s+", " ", part)
            out += re.findall(r"\$\(([^)]*)\)", part) if nested else []
            out.append(part)
    return out


def typed() -> list[str]:
    return [c for b in blocks(section()) for c in commands(b)]


@cache
def dev_outputs() -> frozenset[str]:
    return frozenset(stack_run("dev").outputs)


def check_table(table: dict[tuple[str, ...], tuple[set[str], bool]], tool: str, argv: list[str]) -> None:
    path = next((p for p in sorted(table, key=len, reverse=True) if tuple(argv[: len(p)]) == p), None)
    assert path is not None, f"`{tool} {' '.join(argv)}`: no such documented command"
    flags, positional = table[path]
    rest = argv[len(path) :]
    used = {a.split("=", 1)[0] for a in rest if a.startswith("-")}
    assert used <= flags, f"`{tool} {' '.join(argv)}`: undocumented {sorted(used - flags)}"
    assert positional or all(a.startswith("-") for a in rest), f"`{tool} {' '.join(argv)}` takes no argument"


def check(command: str) -> None:
    """One command exists, with the flags it uses."""
    argv = shlex.split(command)
    tool, args = argv[0], argv[1:]
    if tool == "pulumi":
        check_table(PULUMI, tool, args)
        if args[:2] == ["stack", "output"]:
            assert args[2] in dev_outputs(), f"the stack exports no {args[2]}"
    elif tool == "gcloud":
        check_table(GCLOUD, tool, args)
    elif tool == "python" and args[:2] == ["-m", "components"]:
        assert args[2] in COMMANDS, command
        if args[2] == "bootstrap":
            bootstrap_cli.bootstrap_args(bootstrap_cli.parser().parse_args(args[3:]))  # exits on a bad flag
    elif tool in ("python3", "venv/bin/pip"):
        assert args[:3] == ["-m", "venv", "venv"] or args[0] == "install", command
        assert all((ROOT / f).is_file() for f in args[2::2] if f.endswith(".txt")), command
    elif tool == "source":
        assert args == ["venv/bin/activate"], command
    elif tool == "eval":
        assert re.fullmatch(r"\$\(pulumi stack output \w+\)", args[0]), command
    else:
        raise AssertionError(f"`{command}`: {tool} is none of the commands this test knows")


def tool_installs() -> list[str]:
    """The commands the tools paragraph has the user run once (the CLIs themselves are downloads, not commands)."""
    return re.findall(r"`(gcloud components install [^`]*)`", section().split("```", 1)[0])


def test_at_most_twelve_commands_to_the_first_answer() -> None:
    steps = [c for b in blocks(section()) for c in commands(b, nested=False)]
    assert 0 < len(steps) + len(tool_installs()) <= MAX_COMMANDS, [*tool_installs(), *steps]


@pytest.mark.parametrize("command", typed())
def test_every_command_exists_with_the_flags_it_uses(command: str) -> None:
    check(command)


def test_every_inline_command_exists_too() -> None:
    inline = re.findall(r"`((?:gcloud|pulumi|python -m components) [^`]*)`", section())
    assert inline
    for command in inline:
        if command.split()[:3] == ["python", "-m", "components"]:
            assert command.split()[3] in COMMANDS, command
        else:
            check(command)


def test_the_checker_refuses_what_is_not_documented() -> None:
    for bad in (
        "pulumi stack select --create dev --secret-provider x",
        "pulumi up --yes-please",
        "gcloud compute preview-features update ai-zones-visibility",
        "python -m components bootstrap --project p",
        'eval "$(pulumi stack output noSuchOutput)"',
    ):
        with pytest.raises((AssertionError, SystemExit)):
            for command in commands(bad):
                check(command)


def bootstrap_flags() -> dict[str, str]:
    (line,) = [c for c in typed() if c.startswith("python -m components bootstrap")]
    ns = bootstrap_cli.parser().parse_args(shlex.split(line)[4:])
    return {"ns": ns, **bootstrap_cli.stack_values(ns)}  # type: ignore[dict-item]


def test_every_placeholder_of_the_dev_stack_file_is_filled_here() -> None:
    # The bootstrap sets the values its flags name; `pulumi config set` the rest.
    filled = {k for k in bootstrap_flags() if k != "ns"}
    for command in typed():
        argv = shlex.split(command)
        if argv[:3] == ["pulumi", "config", "set"]:
            key = next(a for a in argv[3:] if not a.startswith("-"))
            filled.add(key if ":" in key else f"gke-tpu-slicing:{key}")
    left = set(placeholders(stack_config(ROOT, "dev"), "")) - filled
    assert not left, f"the quick start leaves {sorted(left)} to the user"


def test_what_a_first_up_needs_is_made_by_the_bootstrap_step() -> None:
    flags = bootstrap_flags()
    ns = flags["ns"]
    args = bootstrap_cli.bootstrap_args(ns)  # type: ignore[arg-type]
    regs = declare(lambda: Bootstrap("bootstrap", args) and None)
    buckets = {r.inputs["name"]: r.inputs for r in regs if r.type == "gcp:storage/bucket:Bucket"}
    # The state `pulumi login` points at, versioned; the weights bucket the stack reads.
    (login,) = [c for c in typed() if c.startswith("pulumi login ")]
    assert login == f"pulumi login {state_url(ns.state_bucket)}"
    assert buckets[ns.state_bucket]["versioning"] == {"enabled": True}
    assert ns.weights_bucket in buckets and flags["gke-tpu-slicing:serving.weightsBucket"] == ns.weights_bucket
    services = {r.inputs["service"] for r in regs if r.type == "gcp:projects/service:Service"}
    assert {"container.googleapis.com", "compute.googleapis.com"} <= services
    assert [r for r in regs if r.type == "gcp:compute/previewFeature:PreviewFeature"]
    assert [r.inputs["name"] for r in regs if r.type == "gcp:kms/cryptoKey:CryptoKey"] == ["dev"]
    # No passphrase: the dev stack's secrets provider is its key.
    assert "PULUMI_CONFIG_PASSPHRASE" not in section()


def test_the_order_of_the_steps() -> None:
    text = section()
    up = text.index("pulumi up\n```")
    advice = text.index("**The long run.**")
    assert advice < up and "tmux" in text[advice:up] and "CI" in text[advice:up]
    assert text.index("serving.weightsDownload.enabled true") < up
    # verifyCommand runs `python -m components verify`: the virtualenv is said where it runs.
    verify = text.index('eval "$(pulumi stack output verifyCommand)"')
    block = text.rindex("```bash", 0, verify)
    before = text[text.rindex("\n\n", 0, block - 2) : verify]  # the paragraph that introduces the block
    assert "virtualenv" in before, before
    assert text.index("source venv/bin/activate") < text.index("python -m components bootstrap")


def test_the_tools_the_commands_use_are_named_in_the_section() -> None:
    text = section()
    for tool in ("Pulumi CLI", "Python 3.11", "Google Cloud CLI", "gke-gcloud-auth-plugin", "Owner"):
        assert tool in text, tool
    assert {shlex.split(c)[0] for c in typed()} <= {"gcloud", "pulumi", "python", *SHELL, "venv/bin/pip"}


def test_the_count_counts_chains_and_substitutions() -> None:
    assert commands('a && b | c\n# comment\neval "$(d e)"\nf \\\n  --g\n', nested=False) == [
        "a",
        "b",
        "c",
        'eval "$(d e)"',
        "f --g",
    ]
    assert commands('a && b | c\n# comment\neval "$(d e)"\nf \\\n  --g\n') == [
        "a",
        "b",
        "c",
        "d e",
        'eval "$(d e)"',
        "f --g",
    ]
    assert Path(ROOT / "requirements.txt").is_file()


# gcloud commands that act on a project's resources: without --project they act on whatever project gcloud's
# configuration names, and `preview-features update` fails without one (https://cloud.google.com/sdk/gcloud/reference/
# compute/preview-features/update).
NEEDS_PROJECT = re.compile(
    r"gcloud (?:beta )?(?:services enable|compute preview-features update|storage buckets create|"
    r"iam service-accounts create|container clusters update|kms \S+ create|monitoring channels list)\b"
)


def test_every_gcloud_command_that_needs_a_project_names_it() -> None:
    sources = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "components").rglob("*.py"))]
    missing = []
    for path in sources:
        # A command continued on the next line (in a shell block, in prose, or over adjacent string literals) is one.
        text = re.sub(r"\"\s*\n\s*f?\"", "", path.read_text()) if path.suffix == ".py" else path.read_text()
        text = re.sub(r"\\?\n\s*", " ", text)
        for match in NEEDS_PROJECT.finditer(text):
            command = re.split(r"[`)'\"]", text[match.start() :], maxsplit=1)[0]
            if "--project" not in command:
                missing.append(f"{path.relative_to(ROOT)}: {command}")
    assert missing == []
