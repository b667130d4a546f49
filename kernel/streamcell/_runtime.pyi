"""Type stub for the native runtime extension (native/_runtime.pyx)."""

from typing import Any

OK: int
FULL: int
EMPTY: int
CLOSED: int
SCHEDULERS: dict[str, int]
REORDERS: dict[str, int]
KEYED_QUEUES: dict[str, int]

def buffer_cache_trim(age_s: float = 0.0) -> int: ...
def buffer_cache_bytes() -> int: ...
def now_ns() -> int: ...
def paced_due_ns(t0_ns: int, row: int, batch_size: int, burst: int, rate: float) -> int: ...
def decode_list(encoded: Any, inner_lt: int) -> tuple[Any, ...]: ...

class Program:
    vertex: int
    def __init__(
        self, nsteps: int, max_out: int = 64, dag: tuple[int, int, int, int] | None = None
    ) -> None: ...
    def dag_vertex(self, v: int, name: str, nin: int, sink: int) -> None: ...
    def dag_source(self, i: int, v: int, lts: bytes) -> None: ...
    def dag_sink(self, lts: bytes) -> None: ...
    def dag_edge(self, u: int, w: int, port: int) -> None: ...
    def dag_merge(self, v: int, lts: bytes, maps: list[list[int]], port_col: int) -> None: ...
    def push_phase(self, sources: list[list[Any]], timeout_ns: int = -1) -> int: ...
    def push_phases(
        self, sources: list[Any], rounds: int, start: int = 0, timeout_ns: int = -1
    ) -> tuple[int, int]: ...
    def dag_take(self, sink: int, max_rows: int = 65536) -> Any: ...
    def dag_discard(self, sink: int) -> int: ...
    def dag_wait(self, timeout_ns: int) -> int: ...
    def dag_stats(self) -> tuple[dict[str, Any], list[dict[str, Any]]]: ...
    def close(self) -> None: ...
    def set_input(
        self, lts: bytes, keep_views: bytes | None = None, lean: bool = False
    ) -> None: ...
    def set_output(self, lts: bytes, coalesce_rows: int = 0) -> None: ...
    def add_filter(
        self, step: int, cin: bool, cout: bool, lts: bytes, pred: list[Any], capacity: int
    ) -> None: ...
    def add_project(
        self,
        step: int,
        cin: bool,
        cout: bool,
        in_lts: bytes,
        out_lts: bytes,
        src: list[int],
        exprs: list[Any],
        capacity: int,
    ) -> None: ...
    def add_fused(self, parts: list[tuple[Any, ...]]) -> None: ...
    def add_keyed(self, kind: str, step: int, *args: Any, **kw: Any) -> None: ...
    def add_step(self, step: int, *args: Any) -> None: ...
    def add_window(self, step: int, *args: Any) -> None: ...
    def add_join(
        self,
        step: int,
        cin: bool,
        cout: bool,
        in_lts: bytes,
        out_lts: bytes,
        widths: list[int],
        left_keys: list[int],
        right_keys: list[int],
        time_cols: list[int],
        within: int,
        lateness: int,
        outs: list[int],
        reason: bytes,
        capacity: int,
    ) -> None: ...
    def add_correlate(
        self,
        step: int,
        cin: bool,
        cout: bool,
        in_lts: bytes,
        out_lts: bytes,
        widths: list[int],
        keys: list[list[int]],
        time_cols: list[int],
        over: int,
        lateness: int,
        aggs: list[tuple[int, int, int]],
        outs: list[tuple[int, int]],
        reason: bytes,
        capacity: int,
    ) -> None: ...
    def add_explode(
        self,
        step: int,
        cin: bool,
        cout: bool,
        in_lts: bytes,
        out_lts: bytes,
        cols: list[int],
        reason: bytes,
        capacity: int,
    ) -> None: ...
    def add_transfer(
        self,
        step: int,
        in_lts: bytes,
        mid_lts: bytes,
        out_lts: bytes,
        keys: list[int],
        amount: int,
        is_float: bool,
        initial_f: float,
        initial_i: int,
        overdraft: bool,
        serial: bool,
        reasons: list[bytes],
        rejected: bytes,
        capacity: int,
    ) -> int: ...
    def entity_stats(self, table: int) -> tuple[int, int]: ...
    def add_speculate(
        self,
        step: int,
        in_lts: bytes,
        out_lts: bytes,
        kernel: int,
        args: list[int],
        kinds: bytes,
        workers: int,
        horizon: int,
        max_horizon: int,
        capacity: int,
    ) -> int: ...
    def speculate_stats(self, op: int) -> dict[str, Any]: ...
    def add_sketch(
        self,
        step: int,
        cin: bool,
        cout: bool,
        lts: bytes,
        keys: list[int],
        specs: list[tuple[int, int, int]],
        partitions: int,
        capacity: int,
    ) -> SketchTap: ...
    def op_names(self) -> list[str]: ...
    def start(
        self,
        workers: int = 1,
        scheduler: str = "CT",
        reorder: str = "nonblocking",
        keyed: str = "hybrid",
        partitions: int = 0,
        window: int = 0,
        marker_every: int = 16,
        idle_sleep_ns: int = 0,
    ) -> None: ...
    def push_many(
        self,
        batch: Any,
        offset: int,
        n: int,
        seq0: int,
        batch_size: int,
        timeout_ns: int = -1,
    ) -> tuple[int, int]: ...
    def pace(
        self, rate: float, batch_size: int, burst: int, origin_ns: int, catchup_ns: int
    ) -> None: ...
    def pace_submit(self, batch: Any, offset: int, n: int, seq0: int) -> int: ...
    def pace_wait(self, timeout_ns: int) -> tuple[int, int, bool]: ...
    def pace_pushed(self) -> int: ...
    def pace_halt(self) -> tuple[int, int]: ...
    def pace_end(self) -> None: ...
    def finish(self, timeout_ns: int = -1) -> int: ...
    def take_many(self, timeout_ns: int = 0, max_rows: int = 65536) -> tuple[int, bool, Any]: ...
    def take(self, timeout_ns: int = 0) -> tuple[int, bool, Any]: ...
    def sides(self) -> list[tuple[int, list[int], list[int], list[int], list[str | None], Any]]: ...
    def counters(self) -> list[tuple[int, int, int, int, int]]: ...
    def metrics(self) -> dict[str, Any]: ...
    def pause(self) -> int: ...
    def resume(self) -> int: ...
    def stop(self) -> int: ...
    def error(self) -> tuple[int, str, str] | None: ...

class SketchTap:
    """Queries into a running sketch stage (exec/ops_sketch.h)."""

    states: list[int]
    def nkeys(self, part: int = 0) -> int: ...
    def keys(self, part: int) -> Any: ...
    def summary(self, part: int, key: int, spec: int) -> tuple[float, ...]: ...
    def to_bytes(self, part: int, key: int, spec: int) -> bytes: ...
