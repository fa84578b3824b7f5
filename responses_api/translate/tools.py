"""Responses tools → chat tools, and ``tool_choice`` (docs/api/responses.md).

Function, custom and client ``tool_search`` tools become chat functions;
namespace tools become one function per inner tool, named so the call maps
back (:class:`ToolRef`); hosted tools are dropped. ``tool_choice`` names
tools the way the client wrote them and is resolved here against what the
chat request offers.

Sans-I/O, like the rest of ``translate``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from responses_api.protocol.errors import ApiError, invalid
from responses_api.protocol.tools import (
    AllowedToolsChoice,
    CustomTool,
    FunctionChoice,
    FunctionTool,
    HostedChoice,
    HostedTool,
    NamespaceTool,
    Tool,
    ToolSearchTool,
)

_CHAT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class ToolRef:
    """What a chat function name stands for on the Responses side."""

    kind: str  # "function", "custom", "tool_search", or "mcp" (the namespace: its server)
    name: str
    namespace: str | None = None
    # An MCP tool whose calls wait for the client's approval.
    approval: bool = False
    # A hosted kind's tool (``translate.hosted_calls``): the item type its
    # calls become and their id prefix.
    item: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class HostedFunction:
    """A function the gateway offers the model for a hosted tool it runs;
    ``ref`` says what its calls become."""

    ref: ToolRef
    description: str
    parameters: dict[str, Any]


def _chat_name(name: str, namespace: str | None, taken: dict[str, ToolRef]) -> str:
    candidate = f"{namespace}__{name}" if namespace else name
    if not _CHAT_NAME.match(candidate) or candidate in taken:
        digest = hashlib.sha1(candidate.encode()).hexdigest()[:8]
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", candidate)[:55]
        candidate = f"{safe}_{digest}"
    return candidate


def _custom_parameters(tool: CustomTool) -> dict[str, Any]:
    description = "The raw input for this tool, as free-form text."
    fmt = tool.format or {}
    if fmt.get("type") == "grammar" and isinstance(fmt.get("definition"), str):
        description += (
            f" It must follow this {fmt.get('syntax', 'grammar')} grammar:\n{fmt['definition']}"
        )
    return {
        "type": "object",
        "properties": {"input": {"type": "string", "description": description}},
        "required": ["input"],
        "additionalProperties": False,
    }


class ChatTools:
    """Builds the chat tool list and the reverse name map."""

    def __init__(self) -> None:
        self.refs: dict[str, ToolRef] = {}
        self.chat_tools: list[dict[str, Any]] = []
        self.by_client_name: dict[tuple[str | None, str], str] = {}
        self.namespaces: set[str] = set()
        self.dropped: list[str] = []
        # What the model reads of the hosted calls run in this response, by
        # item id (``request.HostedTools``).
        self.results: Mapping[str, str] = {}

    def add(self, tool: Tool) -> None:
        if isinstance(tool, HostedTool) or (
            isinstance(tool, ToolSearchTool) and tool.execution != "client"
        ):
            self.dropped.append(tool.type)
        elif isinstance(tool, NamespaceTool):
            self.namespaces.add(tool.name)
            for inner in tool.tools:
                self._add_one(inner, namespace=tool.name)
        else:
            self._add_one(tool, namespace=None)

    def _add_one(
        self, tool: FunctionTool | CustomTool | ToolSearchTool, namespace: str | None
    ) -> None:
        if isinstance(tool, ToolSearchTool):
            name, kind = "tool_search", "tool_search"
            parameters = tool.parameters or {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to look for."}},
                "required": ["query"],
            }
            description = tool.description or "Search for more tools that can be loaded and used."
        elif isinstance(tool, CustomTool):
            name, kind = tool.name, "custom"
            parameters = _custom_parameters(tool)
            description = tool.description or ""
        else:
            name, kind = tool.name, "function"
            parameters = tool.parameters or {"type": "object", "properties": {}}
            description = tool.description or ""
        if (namespace, name) in self.by_client_name:
            return
        chat_name = _chat_name(name, namespace, self.refs)
        self.refs[chat_name] = ToolRef(kind=kind, name=name, namespace=namespace)
        self.by_client_name[(namespace, name)] = chat_name
        function: dict[str, Any] = {"name": chat_name, "parameters": parameters}
        if description:
            function["description"] = description
        if isinstance(tool, FunctionTool) and tool.strict is not None:
            function["strict"] = tool.strict
        self.chat_tools.append({"type": "function", "function": function})

    def add_mcp(
        self,
        server_label: str,
        name: str,
        description: str,
        parameters: dict[str, Any],
        *,
        approval: bool = False,
    ) -> None:
        """A tool of an MCP server the gateway runs, offered to the model as
        a function named for its server, whose call comes back as ``mcp``
        (``approval``: as a request for the client's approval)."""
        if (server_label, name) in self.by_client_name:
            return
        chat_name = _chat_name(name, server_label, self.refs)
        self.refs[chat_name] = ToolRef(
            kind="mcp", name=name, namespace=server_label, approval=approval
        )
        self.by_client_name[(server_label, name)] = chat_name
        function: dict[str, Any] = {"name": chat_name, "parameters": parameters}
        if description:
            function["description"] = description
        self.chat_tools.append({"type": "function", "function": function})

    def add_hosted(self, function: HostedFunction) -> None:
        """A hosted kind's function (``pipeline.hosted``), under its own name."""
        ref = function.ref
        if (ref.namespace, ref.name) in self.by_client_name:
            return
        chat_name = _chat_name(ref.name, ref.namespace, self.refs)
        self.refs[chat_name] = ref
        self.by_client_name[(ref.namespace, ref.name)] = chat_name
        spec: dict[str, Any] = {"name": chat_name, "parameters": function.parameters}
        if function.description:
            spec["description"] = function.description
        self.chat_tools.append({"type": "function", "function": spec})

    def hosted_name(self, kind: str) -> str | None:
        """The chat name of the hosted kind's function, when it is offered."""
        return next((chat for chat, ref in self.refs.items() if ref.kind == kind), None)

    def chat_name_for(self, name: str, namespace: str | None) -> str:
        return self.by_client_name.get((namespace, name)) or (
            f"{namespace}__{name}" if namespace else name
        )

    def _named(self, name: str, kinds: frozenset[str], namespace: str | None = None) -> str | None:
        """The chat name of the tool the client calls ``name``: a top-level
        tool first, else the one namespaced tool of that name."""
        if namespace is not None:
            found = self.by_client_name.get((namespace, name))
            return found if found is not None and self.refs[found].kind in kinds else None
        found = self.by_client_name.get((None, name))
        if found is not None and self.refs[found].kind in kinds:
            return found
        matches = [
            chat
            for (ns, inner), chat in self.by_client_name.items()
            if ns is not None and inner == name and self.refs[chat].kind in kinds
        ]
        return matches[0] if len(matches) == 1 else None

    # --- tool_choice ---------------------------------------------------------

    def choice(self, choice: Any) -> Any:
        """The chat ``tool_choice`` for the request's, once tools are offered."""
        if choice is None or isinstance(choice, str):
            return choice
        if isinstance(choice, FunctionChoice):
            chat_name = self._named(choice.name, _ANY_KIND)
            if chat_name is None:
                raise not_among_tools(choice.name)
            return {"type": "function", "function": {"name": chat_name}}
        if isinstance(choice, AllowedToolsChoice):
            return choice.mode
        if isinstance(choice, HostedChoice):
            chat_name = self.hosted_name(_HOSTED_CHOICE.get(choice.type) or choice.type)
            if chat_name is None:
                raise hosted_not_run(choice.type)
            return {"type": "function", "function": {"name": chat_name}}
        return None

    def allow_only(self, choice: AllowedToolsChoice) -> None:
        """Keep only the tools ``choice`` allows in the chat request. Each
        entry names a tool of the request, by type and name (a hosted tool by
        its type alone); any other entry is refused, naming it."""
        if not choice.tools:
            raise invalid(
                "tool_choice.tools must name at least one of the tools.",
                param="tool_choice.tools",
            )
        allowed: set[str] = set()
        for index, entry in enumerate(choice.tools):
            allowed.update(self._allowed_entry(entry, f"tool_choice.tools[{index}]"))
        self.chat_tools = [t for t in self.chat_tools if t["function"]["name"] in allowed]
        if not self.chat_tools and choice.mode == "required":
            raise invalid(
                "tool_choice requires a call, but the tools it allows are hosted tools, "
                "which this server does not run.",
                param="tool_choice",
            )

    def _allowed_entry(self, entry: Any, param: str) -> list[str]:
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            raise invalid(f"{param} must be an object with a 'type'.", param=param)
        kind = entry["type"]
        name = entry.get("name")
        if kind in ("function", "custom", "namespace") and not isinstance(name, str):
            raise invalid(f"{param} must name the {kind} tool it allows.", param=param)
        if kind == "namespace":
            if name in self.namespaces:
                return [chat for (ns, _), chat in self.by_client_name.items() if ns == name]
        elif kind in ("function", "custom") and isinstance(name, str):
            namespace = entry.get("namespace")
            chat_name = self._named(
                name, frozenset({kind}), namespace if isinstance(namespace, str) else None
            )
            if chat_name is not None:
                return [chat_name]
        elif kind == "tool_search":
            chat_name = self.by_client_name.get((None, "tool_search"))
            if chat_name is not None and self.refs[chat_name].kind == "tool_search":
                return [chat_name]
        elif kind == "mcp":
            label = entry.get("server_label")
            return [
                chat
                for (ns, _), chat in self.by_client_name.items()
                if ns == label and self.refs[chat].kind == "mcp"
            ]
        elif (chat_name := self.hosted_name(_HOSTED_CHOICE.get(kind) or kind)) is not None:
            # A hosted tool the gateway runs, with the other functions of its kind.
            also = _HOSTED_ALSO.get(self.refs[chat_name].kind, ())
            return [chat_name, *(c for c, ref in self.refs.items() if ref.kind in also)]
        elif kind in self.dropped:
            return []  # a hosted tool of the request: dropped, as it would be anyway
        what = f"the {kind} tool '{name}'" if isinstance(name, str) else f"a '{kind}' tool"
        raise invalid(f"{param} names {what}, which is not among the tools.", param=param)


# The tool types that name a hosted kind's function in ``allowed_tools``.
_HOSTED_CHOICE = {
    "web_search_preview": "web_search",
    "web_search_preview_2025_03_11": "web_search",
    "web_search_2025_08_26": "web_search",
}

# The other functions a hosted kind offers, allowed with it: web search
# reads the pages it found.
_HOSTED_ALSO = {"web_search": frozenset({"open_page", "find_in_page"})}

_ANY_KIND = frozenset({"function", "custom", "tool_search"})


def hosted_not_run(kind: str) -> ApiError:
    return invalid(
        f"tool_choice names the hosted tool '{kind}', which this server does not run.",
        param="tool_choice",
    )


def not_among_tools(name: str) -> ApiError:
    return invalid(
        f"tool_choice names '{name}', which is not among the tools.", param="tool_choice"
    )
