"""The object fast path's table, derived at start-up from the FastAPI app's own routes.

Why derived: a fast path that kept its own copies of the paths, the query parameters' limits
and the dependencies would drift from the routes; a `Depends` added to a route would be skipped
there without a sound. So everything here is read from what FastAPI itself uses to answer:

- routing: every route the app serves, in FastAPI's order (fastapi.routing.iter_route_contexts,
  what the app's OpenAPI is built from), joined per method into one regex of their own path
  regexes. A request is the fast path's only when the first route FastAPI would pick for it is
  one of the hot ones; its path parameters come from that route's regex and convertors.
- parameters: each route's declared path and query parameters (its Dependant's ModelFields),
  validated by those very fields, so every constraint (max_length, ge, le, a new one) is the
  route's; a value the field refuses, a parameter no route declares, a repeated one or a
  missing required one leaves the request to FastAPI, which answers it.
- dependencies: the route's Dependant tree (route-, router- and app-level dependencies
  included), run in FastAPI's order with its per-request cache. Only what can be run exactly
  as solve_dependencies runs it is taken: plain functions (async, or sync in the threadpool)
  taking the request, path and query parameters and other such dependencies. A route with
  anything else (a yield dependency, a header, cookie or body parameter, security scopes, a
  concurrency limit, a body size limit, a response model) is declined at start-up, with its
  reason, and FastAPI answers all its requests; while any dependency override is set, so are
  all requests.

Stepping aside is always safe: FastAPI answers as it would have without the fast path.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Sequence
from copy import deepcopy
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin
from urllib.parse import unquote

from fastapi import FastAPI, params, routing
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_typed_return_annotation
from fastapi.exceptions import WebSocketRequestValidationError
from pydantic import Json
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from edge.api.error_responses import HANDLERS
from edge.core.asgi import Scope

# The scalar types a query or path parameter may have here (or with None); FastAPI reads
# sequences and models from the query string in other ways.
_SCALARS = (str, int, bool, float)
# Defaults handed over as they are: FastAPI deep-copies each, which changes nothing for these.
_IMMUTABLE = (str, int, bool, float, bytes, NoneType)
# Matches every path: stands for a route whose matching is not a path regex and methods.
_ANY_PATH = ""


class Unsupported(Exception):
    """A part of a route the fast path cannot run exactly as FastAPI would."""


@dataclass(frozen=True)
class Field:
    """A declared path or query parameter: its request name, the field that validates it, and
    what FastAPI passes when it is absent."""

    key: str
    field: Any  # fastapi._compat.ModelField
    loc: tuple[str, str]
    required: bool
    default: Any
    copy_default: bool
    validate_default: bool
    # A str with no constraints: validating a str changes nothing, so it is not asked to.
    any_text: bool

    def absent(self) -> Any:
        value = deepcopy(self.default) if self.copy_default else self.default
        if self.validate_default:
            return self.validate(value)
        return value

    def validate(self, value: Any) -> Any:
        """The value as FastAPI passes it; Unsupported when the field refuses it (FastAPI then
        answers its own error)."""
        if self.any_text and type(value) is str:
            return value
        validated, errors = self.field.validate(value, {}, loc=self.loc)
        if errors:
            raise Unsupported(self.key)
        return validated


@dataclass(frozen=True)
class Call:
    """A dependency, or the route function itself, as solve_dependencies calls it: its
    dependencies first (each by its argument name, or for effect only), then its own
    parameters (indexes into the route's fields) and the request."""

    call: Callable[..., Any]
    name: str | None
    is_coroutine: bool
    use_cache: bool
    cache_key: tuple[Any, str]  # solve_dependencies' (without security scopes, refused here)
    dependencies: tuple[Call, ...]
    fields: tuple[tuple[str, int], ...]
    request_names: tuple[str, ...]

    async def arguments(self, request: Request, values: Sequence[Any], cache: dict[Any, Any]) -> dict[str, Any]:
        arguments: dict[str, Any] = {}
        for dependency in self.dependencies:
            # As solve_dependencies: the dependency's own dependencies are solved before the
            # cache is asked for its result.
            given = await dependency.arguments(request, values, cache)
            if dependency.use_cache and dependency.cache_key in cache:
                result = cache[dependency.cache_key]
            else:
                result = await dependency.run(given)
            if dependency.name is not None:
                arguments[dependency.name] = result
            cache.setdefault(dependency.cache_key, result)
        for name, index in self.fields:
            arguments[name] = values[index]
        for name in self.request_names:
            arguments[name] = request
        return arguments

    async def run(self, arguments: dict[str, Any]) -> Any:
        if self.is_coroutine:
            return await self.call(**arguments)
        return await run_in_threadpool(self.call, **arguments)


@dataclass(frozen=True)
class FastRoute:
    """A hot route as the fast path answers it."""

    route: BaseRoute
    endpoint: Callable[..., Any]
    path_regex: re.Pattern[str]
    convertors: dict[str, Any]
    path_fields: tuple[tuple[int, Field], ...]  # index into the values, field
    query_fields: dict[str, tuple[tuple[int, Field], ...]]  # request name -> fields reading it
    absent_fields: tuple[tuple[int, Field], ...]
    field_count: int
    call: Call

    async def respond(self, request: Request, values: Sequence[Any]) -> Response:
        response = await self.call.run(await self.call.arguments(request, values, {}))
        if not isinstance(response, Response):
            raise TypeError(f"{self.endpoint.__name__} answered {type(response).__name__}, not a Response")
        return response


@dataclass(frozen=True)
class Plan:
    """A request the fast path answers: the route, its path parameters and every declared
    parameter's value, as FastAPI would pass them."""

    route: FastRoute
    path_params: dict[str, Any]
    values: list[Any]

    @property
    def endpoint(self) -> Callable[..., Any]:
        return self.route.endpoint

    @property
    def arguments(self) -> dict[str, Any]:
        """The route function's own path and query arguments, by name."""
        return {name: self.values[index] for name, index in self.route.call.fields}

    async def respond(self, request: Request) -> Response:
        return await self.route.respond(request, self.values)


class FastTable:
    """Per method, one regex of every route's path regex in FastAPI's order, and the hot route
    (or None) each alternative stands for."""

    def __init__(
        self,
        app: FastAPI,
        by_method: dict[str, tuple[re.Pattern[str], re.Pattern[str], list[FastRoute | None]]],
        declined: dict[str, str],
    ) -> None:
        self.app = app
        # Per method: the hot routes' own regexes (a cheap first look, which most other
        # requests fail), every route's up to the last hot one, and the hot route of each.
        self.by_method = by_method
        # Hot routes the fast path leaves to FastAPI, and why (as the name of the function).
        self.declined = declined

    @classmethod
    def from_app(cls, app: FastAPI, hot: Iterable[Callable[..., Any]]) -> FastTable:
        hot = set(hot)
        declined: dict[str, str] = {}
        whole_app = _app_unsupported(app)
        contexts = list(_route_contexts(app))
        methods = {method for context in contexts for method in (getattr(context, "methods", None) or ())}
        patterns: dict[str, list[str]] = {method: [] for method in methods}
        targets: dict[str, list[FastRoute | None]] = {method: [] for method in methods}
        for context in contexts:
            endpoint = getattr(context, "endpoint", None)
            fast: FastRoute | None = None
            if endpoint in hot:
                try:
                    if whole_app is not None:
                        raise Unsupported(whole_app)
                    fast = _fast_route(context)
                except Unsupported as exc:
                    declined[getattr(endpoint, "__name__", repr(endpoint))] = str(exc)
            for method, pattern in _alternatives(context, methods):
                patterns[method].append(pattern)
                targets[method].append(fast)
        by_method = {}
        for method in methods:
            hot_at = [i for i, target in enumerate(targets[method]) if target is not None]
            if not hot_at:
                continue
            # The routes after the last hot one cannot take a request from it.
            kept = patterns[method][: hot_at[-1] + 1]
            regex = re.compile("|".join(f"(?P<r{i}>{pattern})" for i, pattern in enumerate(kept)))
            hot_only = re.compile("|".join(f"(?:{kept[i]})" for i in hot_at))
            by_method[method] = (hot_only, regex, targets[method][: len(kept)])
        return cls(app, by_method, declined)

    def plan(self, scope: Scope) -> Plan | None:
        """The fast path's plan for this request, or None to leave it to FastAPI."""
        entry = self.by_method.get(scope["method"])
        if entry is None or scope.get("root_path") or self.app.dependency_overrides:
            return None
        hot_only, regex, targets = entry
        path: str = scope["path"]
        if hot_only.match(path) is None:
            return None
        first = regex.match(path)
        if first is None:
            return None
        route = targets[int(first.lastgroup[1:])]  # type: ignore[index]  # every alternative is a group
        if route is None:
            return None
        match = route.path_regex.match(path)
        if match is None:  # the route's own regex, as FastAPI matches it
            return None
        try:
            return _plan(route, match, scope.get("query_string", b""))
        except Unsupported:
            return None


def _plan(route: FastRoute, match: re.Match[str], query_string: bytes) -> Plan | None:
    values: list[Any] = [None] * route.field_count
    path_params = {name: route.convertors[name].convert(value) for name, value in match.groupdict().items()}
    for index, field in route.path_fields:
        if field.key in path_params:
            values[index] = field.validate(path_params[field.key])
        elif field.required:
            return None
        else:
            values[index] = field.absent()
    # Any name no field reads, and any repeated one, is FastAPI's to answer.
    given: set[str] = set()
    query_fields = route.query_fields
    for key, value in query_pairs(query_string):
        readers = query_fields.get(key)
        if readers is None or key in given:
            return None
        given.add(key)
        for index, field in readers:
            values[index] = field.validate(value)
    for index, field in route.absent_fields:
        if field.key not in given:
            if field.required:
                return None
            values[index] = field.absent()
    return Plan(route, path_params, values)


def query_pairs(query_string: bytes) -> list[tuple[str, str]]:
    """The query string's (name, value) pairs as Starlette's QueryParams reads them,
    parse_qsl(query_string.decode("latin-1"), keep_blank_values=True), in a third of its time:
    the same steps, without its per-call checks and conversions."""
    pairs: list[tuple[str, str]] = []
    for piece in query_string.decode("latin-1").split("&"):
        if not piece:
            continue
        name, _, value = piece.partition("=")
        if "+" in name:
            name = name.replace("+", " ")
        if "%" in name:
            name = unquote(name)
        if "+" in value:
            value = value.replace("+", " ")
        if "%" in value:
            value = unquote(value)
        pairs.append((name, value))
    return pairs


def _route_contexts(app: FastAPI) -> Iterable[Any]:
    """Every route of the app, in the order FastAPI matches them (included routers flattened,
    each with its effective path, methods and Dependant)."""
    iterate = getattr(routing, "iter_route_contexts", None)
    if iterate is None:  # a FastAPI whose app.routes are already flat
        return list(app.router.routes)
    return list(iterate(app.router.routes))


def _alternatives(context: Any, methods: set[str]) -> list[tuple[str, str]]:
    """(method, regex) for each method the route matches a request of; a route not matched by
    a path regex and methods matches every path here, so that what follows it is FastAPI's."""
    original = getattr(context, "original_route", context)
    if isinstance(original, WebSocketRoute):
        return []  # never an HTTP request's
    regex = getattr(context, "path_regex", None)
    own = getattr(context, "methods", None)
    if isinstance(original, Route) and isinstance(regex, re.Pattern):
        # One group per alternative: the route's own named groups made plain.
        pattern = re.sub(r"\(\?P<[^>]+>", "(?:", regex.pattern)
        return [(method, pattern) for method in (own or methods)]
    return [(method, _ANY_PATH) for method in methods]


def _app_unsupported(app: FastAPI) -> str | None:
    """Why no request of this app can be answered before it, if one can't: middleware or a
    body size limit the fast path would skip, or exception handlers it does not use."""
    if app.user_middleware:
        return "the app has middleware"
    if getattr(app, "max_body_size", None) is not None:
        return "the app limits body sizes"
    if app.root_path:
        return "the app has a root path"
    for kind, handler in app.exception_handlers.items():
        if kind is WebSocketRequestValidationError:
            continue  # not an HTTP request's
        if HANDLERS.get(kind) is not handler:
            return f"the app's handler for {kind} is not error_responses.py's"
    return None


def _fast_route(context: Any) -> FastRoute:
    for attribute in ("body_field", "response_model", "max_body_size"):
        if getattr(context, attribute, None) is not None:
            raise Unsupported(f"the route has a {attribute.replace('_', ' ')}")
    if getattr(context, "is_sse_stream", False) or getattr(context, "is_json_stream", False):
        raise Unsupported("the route streams items")
    dependant: Dependant = context.dependant
    returns = get_typed_return_annotation(dependant.call) if dependant.call is not None else None
    if not (inspect.isclass(returns) and issubclass(returns, Response)):
        raise Unsupported("the route function does not answer a Response")
    path_fields: list[tuple[int, Field]] = []
    query_fields: dict[str, list[tuple[int, Field]]] = {}
    counter = [0]  # the next field's index into the values
    call = _call(dependant, None, path_fields, query_fields, counter)
    readers = {key: tuple(fields) for key, fields in query_fields.items()}
    return FastRoute(
        route=getattr(context, "original_route", context),
        endpoint=context.endpoint,
        path_regex=context.path_regex,
        convertors=dict(context.param_convertors),
        path_fields=tuple(path_fields),
        query_fields=readers,
        absent_fields=tuple(pair for fields in readers.values() for pair in fields),
        field_count=counter[0],
        call=call,
    )


def _call(
    dependant: Dependant,
    name: str | None,
    path_fields: list[tuple[int, Field]],
    query_fields: dict[str, list[tuple[int, Field]]],
    counter: list[int],
) -> Call:
    """dependant as a Call, its fields numbered into the route's values; Unsupported for
    anything solve_dependencies would do that the Call does not."""
    call = dependant.call
    what = getattr(call, "__name__", repr(call))
    for kind in ("header_params", "cookie_params", "body_params"):
        if getattr(dependant, kind):
            raise Unsupported(f"{what} reads {kind.replace('_', ' ')}")
    for kind in (
        "websocket_param_name",
        "response_param_name",
        "background_tasks_param_name",
        "security_scopes_param_name",
        "own_oauth_scopes",
        "concurrency",
    ):
        if getattr(dependant, kind, None):
            raise Unsupported(f"{what} has {kind.replace('_', ' ')}")
    if not _plain_function(call):
        raise Unsupported(f"{what} is not a plain function (a class, a callable object, a wrapper or a generator)")
    assert call is not None
    dependencies = tuple(_call(sub, sub.name, path_fields, query_fields, counter) for sub in dependant.dependencies)
    fields: list[tuple[str, int]] = []
    # Each declaration its own value, validated by its own field, as solve_dependencies does
    # at each level.
    for field in dependant.path_params:
        index = counter[0]
        counter[0] += 1
        path_fields.append((index, _field(field)))
        fields.append((field.name, index))
    for field in dependant.query_params:
        index = counter[0]
        counter[0] += 1
        declared = _field(field)
        query_fields.setdefault(declared.key, []).append((index, declared))
        fields.append((field.name, index))
    names = tuple(n for n in (dependant.request_param_name, dependant.http_connection_param_name) if n)
    return Call(
        call=call,
        name=name,
        is_coroutine=inspect.iscoroutinefunction(call),
        use_cache=dependant.use_cache,
        cache_key=(call, dependant.scope or ""),
        dependencies=dependencies,
        fields=tuple(fields),
        request_names=names,
    )


def _plain_function(call: Any) -> bool:
    """A function (or bound method) called as it is: FastAPI classifies others (wrappers,
    partials, callable objects, classes) by what they wrap, which is not repeated here."""
    if not (inspect.isfunction(call) or inspect.ismethod(call)):
        return False
    if inspect.unwrap(call) is not call:
        return False
    return not (inspect.isgeneratorfunction(call) or inspect.isasyncgenfunction(call))


def _field(field: Any) -> Field:
    """A path or query parameter the fast path reads as FastAPI does: a scalar (or None),
    under its alias, from the query string or the path."""
    info = field.field_info
    if not isinstance(info, params.Query | params.Path):
        raise Unsupported(f"{field.name} is not a query or path parameter")
    if info.validation_alias not in (None, field.alias):  # AliasChoices, AliasPath
        raise Unsupported(f"{field.name} has a validation alias of its own")
    if any(type(item) is Json for item in info.metadata):
        raise Unsupported(f"{field.name} is JSON")
    if not _scalar(info.annotation):
        raise Unsupported(f"{field.name} is not a scalar")
    default = field.default
    return Field(
        key=field.alias,
        field=field,
        loc=("query" if isinstance(info, params.Query) else "path", field.alias),
        required=info.is_required(),
        default=default,
        copy_default=not isinstance(default, _IMMUTABLE),
        validate_default=bool(info.validate_default),
        any_text=info.annotation in (str, str | None) and not info.metadata,
    )


def _scalar(annotation: Any) -> bool:
    if annotation in _SCALARS:
        return True
    if get_origin(annotation) in (Union, UnionType):
        return all(arg is NoneType or arg in _SCALARS for arg in get_args(annotation))
    return False
