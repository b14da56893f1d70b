"""Stand-ins for the heavy modules OpenRLHF and verl import, so the framework tests can drive their own code on a CPU.

Which modules are stubbed, and why (only these; everything else the frameworks import is the real package):

- ``ray``: needs its cluster runtime (a native package with its own processes). verl imports it at module level
  (``verl.protocol``, the reward loop) and runs its reward loop workers as Ray actors. The stand-in runs actors in
  this process: ``ray.remote(cls).options(...).remote(*args)`` builds the object on its own thread with its own
  asyncio event loop (as Ray runs an async actor), ``handle.method.remote(...)`` runs the method there and returns a
  reference that ``ray.get`` resolves or a coroutine awaits; ``ray.nodes()`` names one alive node. Nothing else of
  Ray is modelled: any other attribute is an inert placeholder (option objects such as scheduling strategies can be
  built and are ignored).
- ``vllm``, ``deepspeed``, ``flash_attn``: CUDA-only packages the frameworks import for generation and training, which
  these tests never run. Their stand-ins are inert placeholders (any attribute or submodule exists; calling one
  raises), so an import succeeds and a use fails loudly.

A module that is really installed is never replaced. :func:`install_stubs` returns the names it stubbed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import types
from typing import Any


__all__ = ["STUBBED", "install_stubs", "shutdown_actors"]

STUBBED = ("ray", "vllm", "deepspeed", "flash_attn")


class _PlaceholderMeta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(f"{cls.__qualname__}.{name}")


def _placeholder(qualname: str) -> type:
    """An inert class: subclassable, usable in annotations and isinstance. Ray's option objects (scheduling
    strategies, placement groups) may be built, since the stand-in actors ignore their options; any other use, and
    building one of the CUDA packages' names, raises."""

    def refuse(self: Any, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(f"{qualname} is a test stand-in (tests/frameworks/stubs.py); the real package is not "
                           "installed on this machine.")

    def record(self: Any, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs

    build = record if qualname.split(".")[0] == "ray" else refuse
    return _PlaceholderMeta(qualname.rsplit(".", 1)[-1], (), {"__qualname__": qualname, "__init__": build,
                                                                "__call__": refuse})


class _StubModule(types.ModuleType):
    """A module whose missing attributes are placeholders (submodules are found by :class:`_StubFinder`)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = _placeholder(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``root`` and any ``root.sub.module`` as :class:`_StubModule` (then filled by ``fill``)."""

    def __init__(self, roots: dict[str, Any]) -> None:
        self.roots = roots

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.split(".")[0] not in self.roots:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: Any) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        fill = self.roots[module.__name__.split(".")[0]]
        if fill is not None:
            fill(module)


# -- ray, in process ----------------------------------------------------------------------------------------------
_actors: list[_Actor] = []


class ObjectRef:
    """A finished or running call's result: ``ray.get(ref)`` blocks for it, ``await ref`` waits for it."""

    def __init__(self, future: concurrent.futures.Future) -> None:
        self.future = future

    def result(self) -> Any:
        return self.future.result()

    def __await__(self) -> Any:
        return asyncio.wrap_future(self.future).__await__()


class _Actor:
    """One actor: its object lives on its own thread, which runs the actor's event loop."""

    def __init__(self, cls: type, args: tuple, kwargs: dict) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=f"stub-ray-actor-{cls.__name__}", daemon=True)
        self.thread.start()
        _actors.append(self)

        async def build() -> Any:  # inside the running loop, so the object's get_event_loop() is the actor's
            return cls(*args, **kwargs)

        self.instance = asyncio.run_coroutine_threadsafe(build(), self.loop).result()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, name: str, args: tuple, kwargs: dict) -> ObjectRef:
        method = getattr(self.instance, name)

        async def run() -> Any:
            result = method(*args, **kwargs)
            return await result if asyncio.iscoroutine(result) else result

        return ObjectRef(asyncio.run_coroutine_threadsafe(run(), self.loop))

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


class _Method:
    def __init__(self, actor: _Actor, name: str) -> None:
        self.actor, self.name = actor, name

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef:
        return self.actor.call(self.name, args, kwargs)


class ActorHandle:
    def __init__(self, actor: _Actor) -> None:
        self._actor = actor

    def __getattr__(self, name: str) -> _Method:
        if name.startswith("_"):
            raise AttributeError(name)
        return _Method(self._actor, name)


class _ActorClass:
    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.__name__ = cls.__name__

    def options(self, **options: Any) -> _ActorClass:
        return self

    def remote(self, *args: Any, **kwargs: Any) -> ActorHandle:
        return ActorHandle(_Actor(self.cls, args, kwargs))


class _RemoteFunction:
    def __init__(self, function: Any) -> None:
        self.function = function

    def options(self, **options: Any) -> _RemoteFunction:
        return self

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef:
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(self.function(*args, **kwargs))
        except Exception as exc:  # delivered by ray.get, as Ray does
            future.set_exception(exc)
        return ObjectRef(future)


def _remote(*args: Any, **options: Any) -> Any:
    def wrap(target: Any) -> Any:
        return _ActorClass(target) if isinstance(target, type) else _RemoteFunction(target)

    if len(args) == 1 and not options and callable(args[0]):
        return wrap(args[0])
    return wrap


def _get(refs: Any, timeout: float | None = None) -> Any:
    if isinstance(refs, (list, tuple)):
        return [_get(ref, timeout) for ref in refs]
    return refs.future.result(timeout) if isinstance(refs, ObjectRef) else refs


def _put(value: Any) -> ObjectRef:
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_result(value)
    return ObjectRef(future)


def shutdown_actors() -> None:
    """Stops every stand-in actor's thread (a test's cleanup)."""
    while _actors:
        _actors.pop().stop()


def _fill_ray(module: types.ModuleType) -> None:
    if module.__name__ == "ray":
        module.remote = _remote
        module.get = _get
        module.put = _put
        module.ObjectRef = ObjectRef
        module.is_initialized = lambda: True
        module.init = lambda *args, **kwargs: None
        module.shutdown = lambda *args, **kwargs: shutdown_actors()
        module.nodes = lambda: [{"NodeID": "stub-node", "Alive": True, "Resources": {"CPU": 1.0}}]
    elif module.__name__ == "ray.actor":
        module.ActorHandle = ActorHandle


def install_stubs(names: tuple[str, ...] = STUBBED) -> list[str]:
    """Installs the stand-ins named in ``names`` (a subset of :data:`STUBBED`) for the modules not installed.

    Returns:
        The names stubbed by this call or an earlier one (a module really installed is left alone).
    """
    unknown = sorted(set(names) - set(STUBBED))
    if unknown:
        raise ValueError(f"install_stubs(names={names!r}): {unknown} have no stand-in; it stubs only {STUBBED}.")
    finder = next((f for f in sys.meta_path if isinstance(f, _StubFinder)), None)
    if finder is None:
        finder = _StubFinder({})
        sys.meta_path.append(finder)  # last: a real installation is always found first
    for name in names:
        if name in finder.roots:
            continue
        if importlib.util.find_spec(name) is not None:
            continue  # really installed: keep it
        finder.roots[name] = _fill_ray if name == "ray" else None
    return sorted(finder.roots)


def uninstall_stubs() -> list[str]:
    """Removes the stand-ins again (the finder, and every stubbed module from ``sys.modules``), so tests that run
    after the framework tests see ray, vllm, deepspeed and flash_attn as not installed (TRL, for one, asks whether
    vLLM is there, and reads a stand-in's version as garbage). Modules of the frameworks imported meanwhile keep the
    stand-ins they hold. Returns the names that were stubbed."""
    finder = next((f for f in sys.meta_path if isinstance(f, _StubFinder)), None)
    if finder is None:
        return []
    sys.meta_path.remove(finder)
    roots = sorted(finder.roots)
    for name in [n for n in sys.modules if n.split(".")[0] in finder.roots]:
        del sys.modules[name]
    return roots
