"""The gpuaas policy pack. Only the PolicyPack here: its constructor serves the engine and never returns."""

from policies import ENFORCEMENT, POLICIES
from pulumi_policy import PolicyPack

PolicyPack(name="gpuaas", enforcement_level=ENFORCEMENT, policies=POLICIES)
