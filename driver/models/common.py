"""Constrained string types shared by the catalog-entry and operation-request contracts.

Every value admitted here may end up in slurm.conf, Apache or Prometheus files, YAML
inventories or log lines, so each type is anchored, bounded and free of whitespace or
control characters unless the target format needs them.
"""

from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    StringConstraints,
    WithJsonSchema,
    model_serializer,
)

Slug = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$", max_length=63)]
Identifier = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*$", max_length=128)
]

# W3C trace context's traceparent, version 00: 00-<trace id>-<parent id>-<flags>, neither id of
# zeros only. The contract's pattern says all of it (ECMA-262 and Python both have lookahead);
# pydantic's engine has none, so OperationRequest checks the zeros again.
TraceParent = Annotated[
    str,
    StringConstraints(pattern=r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$", max_length=55),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": r"^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$",
            "maxLength": 55,
        }
    ),
]


def traceparent_ids_valid(traceparent: str) -> bool:
    """Whether neither the trace id nor the parent id of a TraceParent is zeros only."""
    return not any(set(part) == {"0"} for part in traceparent.split("-")[1:3])


ComponentKey = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=32)]
OperationType = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=32)]
FieldName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]
AppVersion = Annotated[
    str, StringConstraints(pattern=r"^[0-9]+\.[0-9]+(\.[0-9]+)?$", max_length=32)
]
DisplayText = Annotated[
    str, StringConstraints(pattern=r"^[^\u0000-\u001f\u007f]+$", min_length=1, max_length=200)
]
LongText = Annotated[
    str, StringConstraints(pattern=r"^[^\u0000-\u0008\u000b-\u001f\u007f]*$", max_length=2000)
]
# Segments are never `.` or `..` (nor empty): a path names the file it seems to name.
_SEGMENT = (
    r"([A-Za-z0-9_@+-][A-Za-z0-9._@+-]*|\.[A-Za-z0-9_@+-][A-Za-z0-9._@+-]*|\.\.[A-Za-z0-9._@+-]+)"
)
AbsolutePath = Annotated[str, StringConstraints(pattern=rf"^(/{_SEGMENT})+$", max_length=4096)]
UrlPath = Annotated[str, StringConstraints(pattern=r"^/[A-Za-z0-9._~/-]*$", max_length=256)]
RelativeFile = Annotated[
    str,
    StringConstraints(pattern=r"^/?[A-Za-z0-9_-][A-Za-z0-9._/-]*$", max_length=256),
]
Hostname = Annotated[
    str,
    StringConstraints(pattern=r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$", max_length=63),
]
NetworkAddress = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9.:-]*$", max_length=253)
]
# An OpenSSH public host key, without comment: what the allocation's sshd must present.
SshHostKey = Annotated[
    str,
    StringConstraints(
        pattern=r"^(ssh-ed25519|ecdsa-sha2-nistp(256|384|521)|ssh-rsa) [A-Za-z0-9+/]+={0,3}$",
        max_length=4096,
    ),
]
# The most allocations one operation may join at once (operation.targets): a scale-out of a
# rack's worth of GPU nodes; the bound keeps one run's fork count and inventory size known.
MAX_TARGETS = 256

PosixName = Annotated[str, StringConstraints(pattern=r"^[a-z_][a-z0-9_-]*$", max_length=32)]


class StrictModel(BaseModel):
    """Unknown keys are errors: a typo in a contract must never be silently ignored."""

    # A field's docstring is its description in the shipped schema: one text for both readers.
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class OutputModel(BaseModel):
    """Something the driver answers with: every key is declared (a key the schema does not
    describe is a defect the tests catch), and each field's docstring is its description."""

    model_config = ConfigDict(
        extra="forbid",
        use_attribute_docstrings=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class SparseOutput(OutputModel):
    """An answer whose keys say what the run gave: a field never set is left out, one set to
    null stays (a member with no release recorded)."""

    # No return annotation: pydantic then publishes the model's own schema for its output.
    @model_serializer(mode="wrap")
    def _only_what_was_given(self, handler: SerializerFunctionWrapHandler):  # noqa: ANN202
        given = self.model_fields_set
        return {key: value for key, value in handler(self).items() if key in given}
