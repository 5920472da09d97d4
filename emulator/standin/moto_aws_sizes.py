# Runs moto's server with DynamoDB's item size rule as AWS applies it.
#
# moto 5.2.5 (the pinned stand-in) refuses an UpdateItem by adding the new
# value of an attribute to the item *including the value it replaces*, and
# counts a binary value by its base64 text (a third more than its bytes).
# DynamoDB counts the item as it will be after the update, binary values by
# their bytes. Without this, an item DynamoDB accepts is refused locally
# once an attribute of it is rewritten at more than about half the limit.
#
# It also keeps a table's stream readable across a cancelled transaction.
# moto rolls a cancelled TransactWriteItems back by putting deep copies of
# the tables in place, stream included, while the shard iterators consumers
# already hold point at the replaced stream object: they never see another
# record (a DynamoDB Streams consumer stops at the first conflict). Here the
# live stream object stays the table's, cut back to where it was before the
# transaction (dropping records of the cancelled writes, as AWS never
# emits them).
#
# And it spares moto work it repeats on every request without need (see
# Speedups, the serializer's keys, Keep-alive and the request log below:
# together they cut make test's CPU by more than a third); what moto answers
# is unchanged. Nothing else of moto is changed.
import base64
import functools
import io
import os
import socket
import sys
from collections import deque

from moto.dynamodb.models import dynamo_type
from moto.dynamodb.models.utilities import bytesize
from moto.dynamodb.exceptions import ItemSizeTooLarge

_size = dynamo_type.DynamoType.size


def size(self):
    if self.type == "B" and isinstance(self.value, str):
        try:
            return len(base64.b64decode(self.value))
        except Exception:  # not base64: count it as moto does
            return bytesize(self.value)
    return _size(self)


def item_size(key, value):
    return bytesize(key) + (value.size() if type(value) is dynamo_type.DynamoType else bytesize(str(value)))


def setitem(self, key, value):
    after = sum(item_size(k, v) for k, v in self.items() if k != key) + item_size(key, value)
    if after > 405000:  # moto's limit, which it measured on AWS (400 KB plus names)
        raise ItemSizeTooLarge
    dict.__setitem__(self, key, value)


dynamo_type.DynamoType.size = size
dynamo_type.LimitedSizeDict.__setitem__ = setitem

from moto.dynamodb.models import DynamoDBBackend

_transact_write_items = DynamoDBBackend.transact_write_items


def transact_write_items(self, transact_items):
    streams = {}
    for item in transact_items:
        _, op = next(iter(item.items()))
        name = op.get("TableName")
        table = self.tables.get(name) if name else None
        shard = getattr(table, "stream_shard", None) if table is not None else None
        if shard is not None and name not in streams:
            streams[name] = (shard, len(shard.items))
    try:
        return _transact_write_items(self, transact_items)
    except Exception:
        for name, (shard, length) in streams.items():
            del shard.items[length:]
            restored = self.tables.get(name)
            if restored is not None and restored.stream_shard is not shard:
                restored.stream_shard = shard
                shard.table = restored
        raise


DynamoDBBackend.transact_write_items = transact_write_items

# Speedups. moto finds a request's service by listing its own package
# directory (a listdir and 150 isdir calls) on every request, parses the same
# few update expressions again for every UpdateItem, and lexes the same
# condition expressions again for every conditional write: 8, 4 and 2 % of
# its CPU under the aggregate's tests (py-spy). The listing cannot change
# while it runs; a parsed update expression is only read (its validator works
# on a deep copy); the lexer's nodes depend on the text alone.
from moto import backends
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.parsing.expressions import UpdateExpressionParser

_modules = tuple(backends.list_of_moto_modules())
backends.list_of_moto_modules = lambda: _modules

_make_update = UpdateExpressionParser.make.__func__


@functools.lru_cache(maxsize=4096)
def _parsed_update(expression):
    return _make_update(UpdateExpressionParser, expression)


def make_update(cls, expression):
    if cls is not UpdateExpressionParser:
        return _make_update(cls, expression)
    return _parsed_update(expression)


UpdateExpressionParser.make = classmethod(make_update)

_lex = ConditionExpressionParser._lex_condition_expression


@functools.lru_cache(maxsize=4096)
def _lexed(expression):
    probe = ConditionExpressionParser.__new__(ConditionExpressionParser)
    probe.condition_expression = expression
    return tuple(_lex(probe))


def lex_condition_expression(self):
    return deque(node._replace(children=list(node.children)) for node in _lexed(self.condition_expression))


ConditionExpressionParser._lex_condition_expression = lex_condition_expression

# moto checks an UpdateItem by walking its expression's tree once per check
# (ten walks), and at every node of every walk builds that check's map of
# node types to handlers anew, twice (DepthFirstTraverser's
# nodes_to_be_processed and process): a check's map is the same at every
# node, so it is built once per check.
from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser


def _handlers(self):
    handlers = self.__dict__.get("_tributary_handlers")
    if handlers is None:
        by_type = self._processing_map()
        handlers = self.__dict__["_tributary_handlers"] = (by_type, tuple(by_type))
    return handlers


def process(self, node):
    for node_type, handler in _handlers(self)[0].items():
        if isinstance(node, node_type):
            return handler(node)


DepthFirstTraverser.nodes_to_be_processed = lambda self: _handlers(self)[1]
DepthFirstTraverser.process = process

# Its first three checks (one SET, ADD and REMOVE clause each, no two paths
# overlapping, no key attribute updated) read only the expression's tree
# (the parsed tree above is one object per expression text), its attribute
# names and the table's key attributes, and change nothing: once they have
# passed for those, they are not walked again.
from moto.dynamodb.parsing import validators as update_validators

_pure_checks = (
    update_validators.ActionCountValidator,
    update_validators.OverlappingPathsValidator,
    update_validators.UpdateHashRangeKeyValidator,
)
_passed = {}  # (id(tree), names, key attributes) -> tree (holding it keeps its id its own)
_validator_init = update_validators.UpdateExpressionValidator.__init__


def validator_init(self, expression, expression_attribute_names, expression_attribute_values, item, table):
    _validator_init(self, expression, expression_attribute_names, expression_attribute_values, item, table)
    names = tuple(sorted((expression_attribute_names or {}).items()))
    self._tributary_checks = key = (id(expression), names, tuple(table.table_key_attrs))
    self._tributary_tree = expression
    if _passed.get(key) is expression:
        self.processors = [p for p in self.processors if not isinstance(p, _pure_checks)]


def validate(self):
    node = self.node_to_validate
    for processor in self.processors:
        node = processor.traverse(node)
        if type(processor) is _pure_checks[-1]:
            if len(_passed) >= 8192:
                _passed.clear()
            _passed[self._tributary_checks] = self._tributary_tree
    return node


update_validators.UpdateExpressionValidator.__init__ = validator_init
update_validators.UpdateExpressionValidator.validate = validate

# moto lists a response class's methods (inspect.getmembers) on every request
# to find the action's handler; a class's methods do not change while it runs.
from moto.core import responses as core_responses

_method_names = functools.lru_cache(maxsize=None)(core_responses.method_names_from_class)
core_responses.method_names_from_class = lambda clazz: list(_method_names(clazz))

# moto 5 writes a response by walking the botocore model, and for each member
# of each structure (each of an item's attribute values' ten) builds a
# context, joins the path walked so far and asks six alias providers which
# keys of the Python object might hold the member: a third of its CPU under
# the timeline's tests (py-spy), for answers that depend only on the member's
# key, its shape and parent shape, and the object's class. They are kept on
# the shape. An object with its own aliases (Meta), a picker of another kind
# or one with response transformers (which read the path) goes the way it did.
from moto.core import serialize as core_serialize
from moto.core.utils import get_value as _get_keyed_value

_get_value = core_serialize.ResponseSerializer.get_value
_plain_pickers = (core_serialize.AttributePicker, core_serialize.XFormedAttributePicker)
_MISSING = core_serialize.MISSING


def _possible_keys(picker, obj, key, shape):
    cache = shape.__dict__.get("_tributary_keys")
    if cache is None:
        cache = shape.__dict__.setdefault("_tributary_keys", {})
    parent = getattr(shape, "parent", None)
    slot = (type(picker), key, type(obj))
    hit = cache.get(slot)
    if hit is not None and hit[0] is parent and hit[1] is picker.alias_providers:
        return hit[2]
    keys = tuple(picker.get_possible_keys(core_serialize.AttributePickerContext(obj=obj, key=key, shape=shape)))
    cache[slot] = (parent, picker.alias_providers, keys)
    return keys


def get_value(self, value, key, shape):
    picker = self._value_picker
    if type(picker) not in _plain_pickers or picker.response_transformers or shape is None or hasattr(value, "Meta"):
        return _get_value(self, value, key, shape)
    for possible in _possible_keys(picker, value, key, shape):
        found = _get_keyed_value(value, possible, _MISSING)
        if found is not _MISSING:
            return found
    return None


core_serialize.ResponseSerializer.get_value = get_value

# Keep-alive. werkzeug's development server closes the connection after
# every response (it cannot tell where an unread body ends), so each request
# cost a connect, an accept and a new thread: more of moto's CPU than the
# DynamoDB work itself. A request with a Content-Length (what the AWS SDKs
# send) has its body read whole before the app runs, so the connection is at
# the next request's first byte when the response is out and may stay open;
# any other request closes it as before. werkzeug's drain after a response
# reads an empty stream then, not the client's next request.
from werkzeug import serving

_make_environ = serving.WSGIRequestHandler.make_environ
_run_wsgi = serving.WSGIRequestHandler.run_wsgi
_send_header = serving.WSGIRequestHandler.send_header
_setup = serving.WSGIRequestHandler.setup


def setup(self):
    _setup(self)
    # werkzeug writes a response's head and body apart: on a connection that
    # stays open, Nagle's algorithm would hold the body until the client's
    # delayed acknowledgement (40 ms).
    self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def make_environ(self):
    # The "100 Continue" werkzeug has written for an Expect header is in
    # the write buffer (below): the client waits for it before its body.
    self.wfile.flush()
    environ = _make_environ(self)
    self.tributary_keep_alive = False
    if (
        "wsgi.input_terminated" in environ
        or self.request_version != "HTTP/1.1"
        or self.headers.get("Connection", "").lower() == "close"
    ):
        return environ
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return environ
    if length < 0:
        return environ
    body = self.rfile.read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(body)
    if len(body) == length:  # short: the client went away; the connection closes
        self.tributary_connection_rfile, self.rfile = self.rfile, io.BytesIO()
        self.tributary_keep_alive = True
    return environ


def run_wsgi(self):
    try:
        _run_wsgi(self)
    finally:
        rfile = self.__dict__.pop("tributary_connection_rfile", None)
        if rfile is not None:
            self.rfile = rfile


def send_header(self, keyword, value):
    if (
        getattr(self, "tributary_keep_alive", False)
        and keyword.lower() == "connection"
        and value.lower() == "close"
    ):
        return
    _send_header(self, keyword, value)


# werkzeug logs a line for every request (a tenth of moto's CPU under the
# timeline's tests, written to a pipe the tests only read for moto's port and
# last words); TRIBUTARY_MOTO_REQUEST_LOG=1 keeps them. Errors are still logged.
if os.environ.get("TRIBUTARY_MOTO_REQUEST_LOG") != "1":
    serving.WSGIRequestHandler.log_request = lambda self, code="-", size="-": None

serving.WSGIRequestHandler.make_environ = make_environ
serving.WSGIRequestHandler.run_wsgi = run_wsgi
serving.WSGIRequestHandler.send_header = send_header
serving.WSGIRequestHandler.setup = setup
# A buffered writer: werkzeug writes a response's head, then its body, then
# flushes; unbuffered (socketserver's default) each is a send of its own.
serving.WSGIRequestHandler.wbufsize = 64 * 1024

# The zygote. Each moto spends about 2 s of CPU before it has answered its
# first request of each service the tests use: importing moto's server (0.5
# s), then each service's backend and botocore model on its first request
# (SSM's imports all of EC2: 1.1 s). make test starts some 45 stand-ins on 2
# cores. `--zygote PATH` does that work once, answering a request of each
# service in process, then listens on the Unix socket PATH; a client sends
# "start" with one file descriptor, and the zygote forks a moto that writes
# its output to that descriptor, serves on a port of the kernel's choosing
# (as `-p 0` does) and so starts warm. The client is told "pid N" and, when
# that moto ends, "exit N" (its wait status); a client that closes the
# connection first has its moto ended. The zygote ends, and with it every
# moto it forked, when PATH is removed or replaced, or once it has had no
# client for ZYGOTE_IDLE seconds. Nothing a moto holds is shared: each is a
# process of its own, forked before any request of a client was served.
ZYGOTE_IDLE = 30


def _warm(app):
    from werkzeug.test import Client

    client = Client(app)

    def auth(service):
        return {"Authorization": "AWS4-HMAC-SHA256 Credential=tributary/20260101/us-east-1/%s/aws4_request, SignedHeaders=host, Signature=0" % service}

    for target, service, kind in (
        ("DynamoDB_20120810.ListTables", "dynamodb", "1.0"),
        ("DynamoDBStreams_20120810.ListStreams", "dynamodb", "1.0"),
        ("Kinesis_20131202.ListStreams", "kinesis", "1.1"),
        ("AmazonSQS.ListQueues", "sqs", "1.0"),
        ("AmazonSSM.DescribeParameters", "ssm", "1.1"),
        ("secretsmanager.ListSecrets", "secretsmanager", "1.1"),
        ("Logs_20140328.DescribeLogGroups", "logs", "1.1"),
        ("GraniteServiceVersion20100801.ListMetrics", "monitoring", "1.0"),
    ):
        headers = dict(auth(service), **{"X-Amz-Target": target, "Content-Type": "application/x-amz-json-" + kind})
        client.post("/", data="{}", headers=headers)
    client.post("/", data="Action=ListTopics&Version=2010-03-31", headers=dict(auth("sns"), **{"Content-Type": "application/x-www-form-urlencoded"}))
    client.post("/", data="Action=GetCallerIdentity&Version=2011-06-15", headers=dict(auth("sts"), **{"Content-Type": "application/x-www-form-urlencoded"}))
    client.get("/2015-03-31/functions/", headers=auth("lambda"))
    client.get("/", headers=auth("s3"))


def _serve_forked(app, out):
    # In the forked moto: its own process group (the client ends it and
    # anything it starts with one signal), ended if the zygote ends, its
    # output on the client's descriptor, fresh random state.
    import ctypes
    import random
    import signal

    from moto.moto_api._internal import mock_random
    from moto.server import MotoRequestHandler, signal_handler
    from werkzeug.serving import run_simple

    os.setpgid(0, 0)
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    random.seed()
    mock_random.seed()
    signal.signal(signal.SIGINT, signal_handler)
    signal.signal(signal.SIGTERM, signal_handler)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.environ["MOTO_PORT"] = "0"
    run_simple("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)


def zygote(path):
    import select
    import signal
    import time

    from moto.server import DomainDispatcherApplication, create_backend_app

    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True
    _warm(app)

    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    ident = os.stat(path).st_ino
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    clients = {}  # connection -> pid of its moto (None before it started)
    idle_since = time.monotonic()
    try:
        while True:
            ready, _, _ = select.select([listener, wake_r] + list(clients), [], [], 1.0)
            for conn in ready:
                if conn is listener:
                    client, _ = listener.accept()
                    clients[client] = None
                elif conn == wake_r:
                    os.read(wake_r, 512)
                else:
                    try:
                        _from_client(conn, clients, app, listener, wake_r, wake_w)
                    except Exception:  # that client's start failed; the others go on
                        __import__("traceback").print_exc()
                        pid = clients.pop(conn, None)
                        conn.close()
                        if pid:
                            _end(pid)
            _reap(clients)
            if clients:
                idle_since = time.monotonic()
            try:
                gone = os.stat(path).st_ino != ident
            except FileNotFoundError:
                gone = True
            if gone or time.monotonic() - idle_since > ZYGOTE_IDLE:
                print("zygote: ending (%s)" % ("its socket was removed" if gone else "no client for %d s" % ZYGOTE_IDLE), file=sys.stderr, flush=True)
                return
    finally:
        for pid in clients.values():
            if pid:
                _end(pid)
        listener.close()


def _from_client(conn, clients, app, listener, wake_r, wake_w):
    try:
        msg, fds, _, _ = socket.recv_fds(conn, 64, 1)
    except OSError:
        msg, fds = b"", []
    pid = clients.get(conn)
    if pid is None and msg.strip() == b"start" and len(fds) == 1:
        child = os.fork()
        if child == 0:
            for c in clients:
                c.close()
            listener.close()
            os.close(wake_r)
            os.close(wake_w)
            __import__("signal").set_wakeup_fd(-1)
            code = 1
            try:
                _serve_forked(app, fds[0])
                code = 0
            except SystemExit as end:
                code = end.code if isinstance(end.code, int) else (0 if end.code is None else 1)
            except BaseException:
                __import__("traceback").print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        os.close(fds[0])
        clients[conn] = child
        conn.sendall(b"pid %d\n" % child)
        return
    for fd in fds:
        os.close(fd)
    if msg:
        return  # anything else a client says is ignored
    # The client went away: its moto ends with it.
    del clients[conn]
    conn.close()
    if pid:
        _end(pid)


def _end(pid):
    import signal

    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:  # forked a moment ago: not yet in its own group
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def _reap(clients):
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        for conn, child in list(clients.items()):
            if child == pid:
                del clients[conn]
                try:
                    conn.sendall(b"exit %d\n" % status)
                except OSError:
                    pass
                conn.close()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--zygote":
        sys.exit(zygote(sys.argv[2]))
    from moto.server import main

    sys.exit(main(sys.argv[1:]))
