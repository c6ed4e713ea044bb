"""The SDK's one way to talk to the server: fills in route templates, sends the key,
retries only requests that are safe to repeat, and turns every failure into a
RoomkitError. Standard library only (urllib)."""
import json
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from http.client import HTTPException, HTTPResponse
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from ._hint_wording import sdk_message
from .errors import RoomkitError

#: Statuses a proxy or a restarting server answers with; worth another try for a safe request.
RETRY_STATUSES = frozenset({502, 503, 504})
#: 503s that say something will not change by retrying.
PERMANENT_CODES = frozenset({"runtime_unavailable"})
MAX_DELAY_S = 8.0
_NO_BODY = object()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """The API never redirects; a redirect would resend the key to another place."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None


class Transport:
    def __init__(
        self,
        base_url: str,
        api_key: Optional[str],
        max_retries: int,
        retry_delay_s: float,
        timeout_s: Optional[float],
        user_agent: str,
    ) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.max_retries = max_retries
        self.retry_delay_s = retry_delay_s
        self.timeout_s = timeout_s
        self.user_agent = user_agent
        self._opener = urllib.request.build_opener(_NoRedirect())
        #: Called with (METHOD, route template) before each try; tests record the routes used.
        self.observers: List[Callable[[str, str], None]] = []

    def url(self, template: str, params: Optional[Mapping[str, Any]] = None, query: Optional[Mapping[str, Any]] = None) -> str:
        """The absolute URL of a route: each parameter becomes one encoded path segment."""
        path = template
        for name, value in (params or {}).items():
            # A file path's slashes travel as %2F so that `.` and `..` in it reach the
            # server as they are; a lone `.` or `..` gets a slash, naming the same directory.
            if value in (".", "..", b".", b".."):
                value = value + ("/" if isinstance(value, str) else b"/")
            path = path.replace("{" + name + "}", urllib.parse.quote(value, safe=""))
        if "{" in path:
            raise TypeError(f"missing path parameter for {template}")
        pairs = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        return self.base_url + path + ("?" + urllib.parse.urlencode(pairs) if pairs else "")

    def json(self, method: str, template: str, **kwargs: Any) -> Any:
        """Calls a JSON route and returns its parsed answer (None for 204)."""
        response = self.send(method, template, **kwargs)
        with response:
            try:
                data = response.read()
            except (OSError, HTTPException) as err:
                raise self._connection_error(err, method, response.geturl()) from err
            if response.status == 204 or not data:
                return None
            try:
                return json.loads(data)
            except ValueError:
                raise RoomkitError(
                    "unexpected_response",
                    f"{method} {response.geturl()} answered with a body that is not JSON: {data[:200]!r}",
                    status=response.status,
                    request_id=response.headers.get("x-request-id"),
                ) from None

    def send(
        self,
        method: str,
        template: str,
        params: Optional[Mapping[str, Any]] = None,
        query: Optional[Mapping[str, Any]] = None,
        body: Any = _NO_BODY,
        raw_body: Optional[bytes] = None,
        headers: Optional[Mapping[str, str]] = None,
        idempotent: Optional[bool] = None,
        timeout_s: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> HTTPResponse:
        """Sends a request and returns its successful answer unread (close it when done).
        Error answers raise RoomkitError. With ``idempotency_key``, every try carries it
        as the Idempotency-Key header, and the request is retried as an idempotent one:
        the server runs it once however often it comes."""
        url = self.url(template, params, query)
        all_headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        all_headers.update(headers or {})
        if self.api_key is not None and template.startswith("/api/"):
            all_headers["Authorization"] = f"Bearer {self.api_key}"
        data: Optional[bytes] = None
        if raw_body is not None:
            data = raw_body
            all_headers.setdefault("Content-Type", "application/octet-stream")
        elif body is not _NO_BODY:
            data = json.dumps(body).encode("utf-8")
            all_headers["Content-Type"] = "application/json"
        if idempotency_key is not None:
            all_headers["Idempotency-Key"] = idempotency_key
        if idempotent is None:
            idempotent = method in ("GET", "HEAD", "PUT") or idempotency_key is not None
        timeout = timeout_s if timeout_s is not None else self.timeout_s
        attempt = 0
        while True:
            for observe in self.observers:
                observe(method, template)
            request = urllib.request.Request(url, data=data, headers=all_headers, method=method)
            try:
                response = self._opener.open(request, timeout=timeout) if timeout is not None else self._opener.open(request)
                return response  # type: ignore[no-any-return]
            except urllib.error.HTTPError as answer:
                with answer:
                    error = _error_from(answer, method, url)
                    retry_after = _retry_after_s(answer.headers.get("retry-after"))
                # A retry whose first try still runs past the server's longest wait is told to ask again.
                key_in_use = idempotency_key is not None and error.code == "idempotency_key_in_use"
                retryable = key_in_use or (answer.code in RETRY_STATUSES and error.code not in PERMANENT_CODES)
                if idempotent and retryable and attempt < self.max_retries:
                    time.sleep(retry_after if retry_after is not None else self._delay(attempt))
                    attempt += 1
                    continue
                raise error from None
            except (urllib.error.URLError, OSError, HTTPException) as err:
                error = self._connection_error(err, method, url)
                if idempotent and error.code == "connection_failed" and attempt < self.max_retries:
                    time.sleep(self._delay(attempt))
                    attempt += 1
                    continue
                raise error from err

    def pass_through(
        self,
        method: str,
        url: str,
        route: str,
        data: Optional[bytes] = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> Tuple[int, Dict[str, str], bytes]:
        """Sends a request whose answer the SDK does not interpret (a program in an
        instance answers it): the key for /api/ URLs, no retries, any status returned."""
        for observe in self.observers:
            observe(method, route)
        all_headers = {"User-Agent": self.user_agent, **(headers or {})}
        if self.api_key is not None and urllib.parse.urlsplit(url).path.startswith("/api/"):
            all_headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(url, data=data, headers=all_headers, method=method)
        try:
            response = self._opener.open(request, timeout=self.timeout_s) if self.timeout_s is not None else self._opener.open(request)
        except urllib.error.HTTPError as answer:
            response = answer
        except (urllib.error.URLError, OSError, HTTPException) as err:
            raise self._connection_error(err, method, url) from err
        with response:
            try:
                return response.status, header_dict(response.headers), response.read()
            except (OSError, HTTPException) as err:
                raise self._connection_error(err, method, url) from err

    def _delay(self, attempt: int) -> float:
        base = min(MAX_DELAY_S, self.retry_delay_s * 2**attempt)
        # Jitter keeps clients that failed together from retrying together.
        return base / 2 + random.random() * base / 2

    def _connection_error(self, err: BaseException, method: str, url: str) -> RoomkitError:
        reason = err.reason if isinstance(err, urllib.error.URLError) else err
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return RoomkitError("timeout", f"{method} {url}: no answer within {self.timeout_s} s")
        return RoomkitError("connection_failed", f"cannot reach roomkit at {self.base_url} ({method} {url}): {reason}")


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _error_from(answer: urllib.error.HTTPError, method: str, url: str) -> RoomkitError:
    """The RoomkitError an error answer stands for; one without the API's Error body is `unexpected_response`."""
    request_id = answer.headers.get("x-request-id")
    try:
        text = answer.read().decode("utf-8", errors="replace")
    except (OSError, HTTPException):
        text = ""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str) and isinstance(body.get("message"), str):
        return RoomkitError(
            body["error"],
            sdk_message(body["message"], body.get("problem"), body.get("hint")),
            status=answer.code,
            details=body.get("details"),
            request_id=body.get("request_id") or request_id,
            problem=body.get("problem") if isinstance(body.get("problem"), str) else None,
            hint=body.get("hint") if isinstance(body.get("hint"), dict) else None,
        )
    excerpt = text.strip()[:200]
    return RoomkitError(
        "unexpected_response",
        f"{method} {url} answered HTTP {answer.code}" + (f": {excerpt}" if excerpt else ""),
        status=answer.code,
        request_id=request_id,
    )


def _retry_after_s(value: Optional[str]) -> Optional[float]:
    if value is None or not value.strip().isdigit():
        return None
    return min(MAX_DELAY_S, float(value.strip()))


def read_events(response: HTTPResponse) -> Iterator[Tuple[str, str]]:
    """The (event, data) pairs of a text/event-stream body, as the HTML standard parses them."""
    event = ""
    data: List[str] = []
    while True:
        raw = response.readline()
        if not raw:
            return
        text = raw.decode("utf-8", errors="replace")
        if text.endswith("\n"):
            text = text[:-1]
        if text.endswith("\r"):
            text = text[:-1]
        for line in text.split("\r"):
            if line == "":
                if data:
                    yield event or "message", "\n".join(data)
                event, data = "", []
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)


def header_dict(headers: Any) -> Dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def new_idempotency_key() -> str:
    """A fresh Idempotency-Key: a random UUID."""
    return str(uuid.uuid4())
