"""gpuaas: load the stack config, build the platform, export what operators read."""

import os

import pulumi

from components.guards.gate import FORMAT, FORMAT_KEY, STACK_KEY, report_refusals_once
from components.loader import load_config, todays_date
from components.platform import Platform
from components.runtime import drop_sdk_debug, tune_collector

# Before anything is built: the run's heap only grows, and the default thresholds walk it over and
# over (half the program's CPU in a preview at fleet scale); the SDK's three blocking debug
# messages per resource are dropped unless GPUAAS_SDK_DEBUG asks for them (components/runtime.py).
tune_collector()
if (warning := drop_sdk_debug(os.environ)) is not None:
    pulumi.log.warn(warning)

# The one read of the clock: the Kubernetes version rule judges support dates by it (warnings on
# the console, refusals before anything is sent); no resource depends on it.
today = todays_date()
# A refusal (bad config, a day-2 guard) is the run's one error, not one traceback per Output.
report_refusals_once()
cfg = load_config(today)
platform = Platform("gpuaas", cfg, today=today)

pulumi.export("platform", cfg.platform.kind)
for key, value in platform.exports.items():
    pulumi.export(key, value)
# Whose outputs these are, and their format: what a day-2 guard's --previous file is checked by.
pulumi.export(STACK_KEY, pulumi.get_stack())
pulumi.export(FORMAT_KEY, FORMAT)
