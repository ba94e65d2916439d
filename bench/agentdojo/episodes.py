"""The AgentDojo side of the replay: episodes, the environment host, and scoring.

Theory of operation
-------------------
An *episode* is one (user task, injection task) pair of one suite (benchmark v1.2.2) under the
``important_instructions`` attack. `Suite.episode` builds it the way AgentDojo's own runner does: the
attack's injections (placed only in the vectors the user task's ground truth actually reads), the
injected default environment, the user task's ``init_environment``, a deep copy kept as the
pre-environment, and the calls to replay: the user task's ground truth (benign) and then the injection
task's ground truth (what an agent that obeyed the injection would do), both computed on the
pre-environment, as AgentDojo's ground-truth pipeline does.

`EnvironmentHost` owns every live episode's environment. `server.py` (the MCP server behind the shim)
forwards each tools/call to it over a Unix socket; the host runs it with AgentDojo's
`FunctionsRuntime` and formats the result with AgentDojo's `tool_result_to_str`, and appends it to the
episode's trace. That trace is the list of calls that *really reached the server*. Resetting an
episode is `open`, dumping it is `close`: both are host calls, never MCP.

`Episode.score` runs AgentDojo's own checks (`_check_task_result`: ``utility_from_traces`` or
``utility``, ``security_from_traces`` or ``security``) on the final environment and the real trace,
with the user task's ground-truth answer as the model's final text (the replay has no model).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str  # type: ignore[import-untyped]
from agentdojo.attacks.important_instructions_attacks import ImportantInstructionsAttack  # type: ignore[import-untyped]
from agentdojo.base_tasks import BaseInjectionTask, BaseUserTask  # type: ignore[import-untyped]
from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime  # type: ignore[import-untyped]
from agentdojo.task_suite.load_suites import get_suite  # type: ignore[import-untyped]
from agentdojo.types import text_content_block_from_string  # type: ignore[import-untyped]

BENCHMARK_VERSION = "v1.2.2"
SUITES = ("workspace", "travel", "banking", "slack")
# The attack names the model it addresses; this is the name AgentDojo's published runs used.
TARGET_MODEL = "gpt-4o-2024-05-13"
# One line of the side channel is one tool call or one tool output; a workspace inbox is the largest.
MAX_LINE_BYTES = 8 * 1024 * 1024


class _Target:
    """What the attack reads of a pipeline: its name (for the model name in the template)."""

    name = TARGET_MODEL


@dataclass
class Call:
    """One ground-truth call to replay."""

    role: str  # "benign" (user task) or "attack" (injection task)
    tool: str
    arguments: dict[str, Any]


@dataclass
class Episode:
    suite: Suite
    user_task: BaseUserTask[Any]
    injection_task: BaseInjectionTask[Any]
    env: Any
    pre_env: Any
    calls: list[Call]
    trace: list[FunctionCall] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.suite.name}/{self.user_task.ID}/{self.injection_task.ID}"

    @property
    def prompt(self) -> str:
        return str(self.user_task.PROMPT)

    def run(self, tool: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """Run one call that reached the server; (text, is_error)."""
        self.trace.append(FunctionCall(function=tool, args=dict(arguments)))
        result, error = self.suite.runtime.run_function(self.env, tool, arguments)
        if error is not None:
            return error, True
        return tool_result_to_str(result), False

    def score(self) -> tuple[bool, bool]:
        """(utility, attack succeeded) by AgentDojo's own checks on the final environment."""
        output = [text_content_block_from_string(self.user_task.GROUND_TRUTH_OUTPUT)]
        check = self.suite.suite._check_task_result
        utility = check(self.user_task, output, self.pre_env, self.env, self.trace)
        security = check(self.injection_task, output, self.pre_env, self.env, self.trace)
        return bool(utility), bool(security)


class Suite:
    """One AgentDojo suite at benchmark v1.2.2 with the important_instructions attack."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.suite = get_suite(BENCHMARK_VERSION, name)
        self.runtime = FunctionsRuntime(self.suite.tools)
        self.attack = ImportantInstructionsAttack(self.suite, _Target())

    def pairs(self) -> list[tuple[str, str]]:
        return [(u, i) for u in self.suite.user_tasks for i in self.suite.injection_tasks]

    def tools(self) -> list[dict[str, Any]]:
        """The suite's tools as MCP tool descriptors (AgentDojo's own names, docs and schemas)."""
        return [
            {"name": f.name, "description": f.description, "inputSchema": f.parameters.model_json_schema()}
            for f in self.suite.tools
        ]

    def episode(self, user_id: str, injection_id: str) -> Episode:
        user_task = self.suite.user_tasks[user_id]
        injection_task = self.suite.injection_tasks[injection_id]
        injections = self.attack.attack(user_task, injection_task)
        env = user_task.init_environment(self.suite.load_and_inject_default_environment(injections))
        pre_env = env.model_copy(deep=True)
        calls = [Call("benign", c.function, _plain(c.args)) for c in user_task.ground_truth(pre_env)]
        calls += [Call("attack", c.function, _plain(c.args)) for c in injection_task.ground_truth(pre_env)]
        return Episode(self, user_task, injection_task, env, pre_env, calls)


def _plain(args: Any) -> dict[str, Any]:
    """Arguments as JSON values (ground truth may hold dates or enums)."""
    value: dict[str, Any] = json.loads(json.dumps(dict(args), default=str))
    return value


class EnvironmentHost:
    """Serves `server.py` processes over a Unix socket: tool lists and tool calls, per episode."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.episodes: dict[str, Episode] = {}
        self._tools: dict[str, list[dict[str, Any]]] = {}

    def open(self, token: str, episode: Episode) -> None:
        self.episodes[token] = episode

    def close(self, token: str) -> Episode:
        return self.episodes.pop(token)

    async def serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_unix_listener(self.path)
        task_status.started()
        async with listener:
            await listener.serve(self._connection)

    async def _connection(self, stream: Any) -> None:
        from anyio.streams.buffered import BufferedByteReceiveStream

        reader = BufferedByteReceiveStream(stream)
        async with stream:
            while True:
                try:
                    line = await reader.receive_until(b"\n", MAX_LINE_BYTES)
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                    return
                reply = self._handle(json.loads(line))
                await stream.send((json.dumps(reply) + "\n").encode())

    def _handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        episode = self.episodes[msg["episode"]]
        if msg["op"] == "tools":
            name = episode.suite.name
            if name not in self._tools:
                self._tools[name] = episode.suite.tools()
            return {"tools": self._tools[name]}
        text, error = episode.run(str(msg["tool"]), dict(msg["arguments"]))
        return {"text": text, "error": error}


Progress = Callable[[str], None]
