"""A small stand-in for tau2-bench's Python source, written for these tests (not upstream code).

It has the layout and the constructs the tool-schema derivation reads (a ``ToolKitBase`` with
``@is_tool`` methods, pydantic models and enums in ``data_model.py``, type aliases, inheritance),
so fetch and derivation can be tested offline.  ``UPSTREAM_ENV`` names the environment variable
that points at a real tau2-bench v1.0.1 checkout or source archive, for the tests that need it.
"""

from __future__ import annotations

import os
from pathlib import Path

UPSTREAM_ENV = "TAU2_BENCH_SOURCE"

TOOLKIT = '''\
from enum import Enum


class ToolType(str, Enum):
    READ = "read"
    WRITE = "write"
    THINK = "think"
    GENERIC = "generic"


def is_tool(tool_type=ToolType.READ, mutates_state=None):
    def mark(func):
        return func
    return mark


class ToolKitType(type):
    pass


class ToolKitBase(metaclass=ToolKitType):
    def __init__(self, db=None):
        self.db = db
'''

DATA_MODEL = '''\
from enum import Enum
from typing import Any, Dict, List, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

Mode = Literal["fast", "slow"]


class Color(str, Enum):
    """A colour."""

    RED = "red"
    GREEN = "green"


class Level(int, Enum):
    LOW = 1
    HIGH = 2


class Point(BaseModel):
    x: int = Field(description="Horizontal position")
    y: int = Field(0, description="Vertical position")


class Shape(BaseModel):
    """A shape on the board.

    It is drawn in one colour.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    color: Color = Field(Color.GREEN, description="Its colour")
    corners: List[Point] = Field(description="The corners")
    label: Optional[str] = None
    tags: Dict[str, Any] = Field(description="Free tags")


class Square(Shape):
    side: float = Field(description="Side length")
    name: str = "square"
'''

MOCK_TOOLS = '''\
from typing import List, Optional, Union

from tau2.domains.mock.data_model import Color, Mode, Point, Shape
from tau2.environment.toolkit import ToolKitBase, ToolType, is_tool


class BoardBase(ToolKitBase):
    @is_tool(ToolType.GENERIC)
    def transfer_to_human_agents(self, summary: str) -> str:
        """
        Hand the conversation over.
        Only when asked.

        Args:
            summary: What happened.
        """
        return summary

    @is_tool(ToolType.READ)
    def count(self) -> int:
        """Count the shapes (the board's own count wins)."""
        return 0


class MockTools(BoardBase):
    def _helper(self) -> None:
        pass

    @is_tool(ToolType.WRITE)
    def draw(self, shape: Union[Shape, dict], color: Optional[Color] = None, mode: Mode = "fast") -> str:
        """Draw a shape.

        Args:
            shape: The shape to draw,
                with its corners.
            color (Color, optional): Paint it this colour.

        Returns:
            str: A message.
        """
        return ""

    @is_tool(ToolType.READ)
    def count(self, kind: str = None, *, limit: int = 12) -> int:
        """
        Count shapes.

        Args:
            kind: Only this kind.
            limit: At most this many.
        """
        return 0

    @is_tool(ToolType.WRITE, mutates_state=False)
    def sketch(self, points: List[Point | dict], note) -> str:
        return ""
'''

MOCK_USER_TOOLS = '''\
from tau2.environment.toolkit import ToolKitBase, ToolType, is_tool


class MockUserTools(ToolKitBase):
    @is_tool(tool_type=ToolType.WRITE)
    def wave(self, times: int) -> str:
        """Wave at the agent.
        Returns how often you waved.
        """
        return ""
'''

FILES = {
    "src/tau2/environment/toolkit.py": TOOLKIT,
    "src/tau2/domains/mock/data_model.py": DATA_MODEL,
    "src/tau2/domains/mock/tools.py": MOCK_TOOLS,
    "src/tau2/domains/mock/user_tools.py": MOCK_USER_TOOLS,
}


def reader(files: dict[str, str]):
    """A ``read(path)`` over ``files`` (repository path -> text)."""
    return lambda path: files[path].encode("utf-8") if path in files else None


def write_tree(top: Path, files: dict[str, str] = FILES) -> None:
    for rel, text in files.items():
        (top / rel).parent.mkdir(parents=True, exist_ok=True)
        (top / rel).write_text(text, encoding="utf-8")


def upstream_source() -> str | None:
    """The tau2-bench v1.0.1 source named by ``UPSTREAM_ENV`` (a folder or archive), or ``None``."""
    value = os.environ.get(UPSTREAM_ENV)
    return value if value and Path(value).expanduser().exists() else None


def use_manifest(monkeypatch, benchmark: str, manifest: dict) -> None:
    """Make every module of :mod:`trace_gym.data` read ``manifest`` for ``benchmark`` (others stay real)."""
    import importlib

    from trace_gym.data import manifest as manifest_module

    real = manifest_module.load_manifest

    def fake(b: str) -> dict:
        return manifest if b == benchmark else real(b)

    for name in ("trace_gym.data", "trace_gym.data.manifest", "trace_gym.data.status", "trace_gym.data.tau2_export",
                 "trace_gym.data.toolsandbox_export"):
        module = importlib.import_module(name)
        if hasattr(module, "load_manifest"):
            monkeypatch.setattr(module, "load_manifest", fake)
