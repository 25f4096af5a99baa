"""The base of every config section: frozen, unknown keys refused, camelCase aliases."""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
)
from pydantic.alias_generators import to_camel


class Model(BaseModel):
    """Base of every config node: immutable, unknown keys rejected, camelCase aliases."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        validate_default=True,
        # A field's description is the string literal right after it, written once: pydantic puts
        # it in Field.description, which the stack-file schema (components/plan/schema.py) and the
        # config reference (components/plan/reference.py) show.
        use_attribute_docstrings=True,
    )
