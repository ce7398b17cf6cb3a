"""Messages a new user meets: each names the key, the value given and the shape the key takes, in the user's terms
(never a pydantic class or a bare "Input should be a valid string"), from the program and from the offline
commands alike."""

from __future__ import annotations

import io

import pytest

from components.cli import plan
from components.model.config.checks import machine_shape
from components.model.config.machines import MACHINE_SERIES
from components.model.config.reference import keys as reference_keys
from components.model.config.settings import ConfigError, load
from tests.stack_config import BASE, CLOCK, REQUIRED_KEYS, P, merge, problems, set_arguments


def plan_error(assignment: str) -> str:
    err = io.StringIO()
    assert plan.main(["--stack", "dev", *set_arguments("dev"), "--set", assignment], stdout=io.StringIO(), stderr=err)
    return err.getvalue()


@pytest.mark.parametrize("number", ["123456789012", "1"])
def test_a_project_number_is_named_and_the_id_asked_for(number: str) -> None:
    """The program reads `gcp:project` as a string (pulumi.Config.get), so a number reaches the settings as one; the
    offline commands read the YAML value, an integer, which they took for "not set"."""
    (line,) = [p for p in problems(BASE, project=number) if p.startswith("gcp:project")]
    assert line.startswith(f"gcp:project = '{number}': a Google Cloud project ID")
    assert "not the project's number" in line and f"gcloud projects describe {number}" in line
    err = plan_error(f"gcp:project={number}")
    assert f"gcp:project = '{number}': a Google Cloud project ID" in err, err
    assert "is not set" not in err


def test_a_reservation_given_as_a_plain_string_names_its_keys() -> None:
    (line,) = problems({"tpu": {"reservation": "my-reservation"}})
    assert line == (
        f"{P}:tpu.reservation = 'my-reservation': a map with the keys name, project, block, consumeType, not a plain "
        "value; set one with `pulumi config set --path 'tpu.reservation.name' <value>`"
    )
    err = plan_error("tpu.reservation=my-reservation")
    assert f"{P}:tpu.reservation = 'my-reservation': a map with the keys name," in err, err
    assert "ReservationSettings" not in err and "dictionary" not in err


def test_any_section_given_a_plain_value_names_its_keys_not_a_class() -> None:
    (line,) = problems({**BASE, "demos": {"subslicing": 3}})
    assert line.startswith(f"{P}:demos.subslicing = 3: a map with the keys enabled, name, topology,"), line
    assert "Settings" not in line


@pytest.mark.parametrize(("given", "shown"), [(123456, "123456"), ("123456", "'123456'")])
def test_a_bare_notification_channel_id_gets_the_full_name_with_it(given: object, shown: str) -> None:
    (line,) = problems({**BASE, "observability": {"notifyNobody": False, "notificationChannels": [given]}})
    assert line.startswith(f"{P}:observability.notificationChannels = "), line
    assert f"{shown} is not a notification channel name" in line
    assert "projects/<project>/notificationChannels/123456" in line
    assert "valid string" not in line


def test_a_channel_of_the_wrong_shape_gets_the_form() -> None:
    (line,) = problems({**BASE, "observability": {"notifyNobody": False, "notificationChannels": [True]}})
    assert "projects/<project>/notificationChannels/<numeric id>" in line and "valid string" not in line


# ------------------------------------------------------------------------------------------------ machine types


@pytest.mark.parametrize(
    "machine",
    [
        *("n2-standard-7", "e2-highmem-32", "n2-highcpu-128", "c2-highmem-8", "c3-standard-2", "n1-standard-3"),
        *("c4-standard-64", "c4-highmem-1", "c4-standard-384"),  # sizes the documented tables lack
    ],
)
def test_a_machine_type_that_does_not_exist_is_refused_with_the_sizes_there_are(machine: str) -> None:
    """GCE's predefined machine types come in fixed sizes per series (the Compute documentation's tables, kept in
    components/model/config/machines.py): n2-standard-7 matched the old pattern and failed only at the node pool's
    create."""
    (line,) = problems({**BASE, "cluster": {"systemMachineType": machine}})
    assert line.startswith(f"{P}:cluster.systemMachineType = '{machine}': "), line
    series = machine.rpartition("-")[0]
    if series in MACHINE_SERIES:
        assert f"{series}-<vCPUs> comes in {', '.join(map(str, MACHINE_SERIES[series].vcpus))}" in line
    assert "cloud.google.com/compute/docs/" in line


def test_every_series_has_its_documented_source_and_sizes_in_order() -> None:
    for name, series in MACHINE_SERIES.items():
        assert series.source.startswith("https://cloud.google.com/compute/docs/"), name
        assert list(series.vcpus) == sorted(set(series.vcpus)) and series.vcpus, name
        assert {n for n, _ in series.memory_gb} <= set(series.vcpus), name


# ------------------------------------------------------------------------------------------------ empty strings

# The one string key where "" is a documented value of its own: the whole reservation instead of one block.
EMPTY_MEANS_SOMETHING = {"tpu.reservation.block"}


def nested(path: str, value: object) -> dict:
    for part in reversed(path.split(".")):
        value = {part: value}
    return value  # type: ignore[return-value]


def test_no_string_key_accepts_an_empty_string_but_the_one_that_means_something() -> None:
    """Every string key ends up in a resource name, a label, a command line or a URL: "" there fails at the API, or
    worse runs (`vllm serve --served-model-name=`). serving.model and serving.servedModelName accepted it."""
    # Every string key, an optional one too (lists of sections, authorizedNetworks, are checked by their own rules).
    keys = [k.path for k in reference_keys() if k.type.startswith("string") and k.path != "project"]
    assert len(keys) >= 40  # not vacuous: the model's string keys
    rules = {k.path: k.rule for k in reference_keys()}
    accepted = []
    for key in keys:
        context = rules[key].context if key in rules else {}  # the other keys the key's legal values need
        try:
            load(merge(merge(merge(REQUIRED_KEYS, BASE), context), nested(key, "")), "my-tpu-project", now=CLOCK)
            accepted.append(key)
        except ConfigError as err:
            assert f"{P}:{key} = ''" in str(err) or f"{P}:{key} " in str(err), (key, str(err))
    assert set(accepted) == EMPTY_MEANS_SOMETHING


@pytest.mark.parametrize("key", ["serving.model", "serving.servedModelName"])
def test_an_empty_model_name_is_refused(key: str) -> None:
    (line,) = problems({**BASE, **nested(key, "")})
    assert line.startswith(f"{P}:{key} = '': a non-empty model name"), line


@pytest.mark.parametrize(
    ("machine", "vcpus", "memory"),
    [  # transcribed from the Compute Engine documentation's tables, not from components/model/config/machines.py
        ("n2-standard-32", 32, 128.0),
        ("n1-standard-96", 96, 360.0),
        ("c4-standard-2", 2, 7.0),
        ("e2-highcpu-32", 32, 32.0),
        ("c4-standard-4", 4, 15.0),  # general-purpose-machines, "C4 standard"
        ("c4-standard-192", 192, 720.0),
        ("c4-standard-288", 288, 1080.0),
        ("c4-highmem-2", 2, 15.0),  # "C4 highmem"
        ("c4-highmem-4", 4, 31.0),
        ("c4-highmem-144", 144, 1116.0),
        ("c4-highcpu-288", 288, 576.0),  # "C4 highcpu"
        ("c3d-highmem-360", 360, 2880.0),  # "C3D highmem"
        ("n2-highmem-128", 128, 864.0),  # "N2 high-memory": off the 8 GB/vCPU ratio
        ("n2-highcpu-96", 96, 96.0),  # "N2 high-CPU": 1 GB/vCPU, up to 96 vCPUs
    ],
)
def test_machine_shapes_match_the_documented_tables(machine: str, vcpus: int, memory: float) -> None:
    assert machine_shape(machine) == (vcpus, memory)
