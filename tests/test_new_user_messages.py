"""Messages a new user meets: each names the key, the value given and the shape the key takes, in the user's terms
(never a pydantic class or a bare "Input should be a valid string"), from the program and from the offline
commands alike."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from components.cli import plan
from tests.harness import set_arguments
from tests.test_all_problems import BASE, P, problems


def plan_error(*assignments: str, tmp_path: Path | None = None) -> str:
    args = [*set_arguments("dev")]
    for assignment in assignments:
        args += ["--set", assignment]
    out, err = io.StringIO(), io.StringIO()
    assert plan.main(["--stack", "dev", *args], stdout=out, stderr=err) != 0
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
