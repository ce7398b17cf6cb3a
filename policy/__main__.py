"""The policy pack entry point: the Pulumi CLI runs `python policy/` and talks to the server this starts.

The rules live in `rules.py`, importable without starting the server, so tests call them directly.
"""

from pulumi_policy import EnforcementLevel, PolicyPack
from rules import PACK_NAME, POLICIES

PolicyPack(name=PACK_NAME, policies=POLICIES, enforcement_level=EnforcementLevel.MANDATORY)
