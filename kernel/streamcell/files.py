"""Where a file source's data lives: a local path or a URI.

A path without a scheme is local. ``file://`` URIs are local paths. Any other URI names a
filesystem that pyarrow reads (``s3://``, ``gs://``, ``hdfs://``, ``abfs://``; Hadoop's
``s3a://`` and ``s3n://`` are read as ``s3://``). Options a filesystem needs go where pyarrow
takes them: the URI's query (``s3://bucket/dir?endpoint_override=host:9000&scheme=http``) or
its environment (``AWS_ACCESS_KEY_ID`` ...).

The notebook process lists a folder and reads what it needs to know before a run (a CSV
header, the first NDJSON lines, Parquet footers: metadata, not rows). The reference and
native engines read the rows the same way; on the Spark engine the executors read them,
given each file's URI as the user wrote it (without the query), so Spark's own filesystem
configuration (``spark.hadoop.fs.s3a.*``) applies there.
"""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote, unquote, urlsplit

from .errors import SourceError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_ALIASES = {"s3a": "s3", "s3n": "s3"}  # Hadoop's names for S3


def scheme(path: str) -> str | None:
    """The URI scheme of ``path`` in lower case, or None for a plain path."""
    m = _SCHEME.match(path)
    return m.group(1).lower() if m else None


def shown(path: str) -> str:
    """``path`` as messages and dead-letter positions show it: a URI without its query and
    user info, where credentials may be written (``?secret_key=...``, ``s3://key:secret@``)."""
    if scheme(path) is None:
        return path
    u = urlsplit(path)
    host = u.netloc.rsplit("@", 1)[-1]
    return u._replace(netloc=host, query="", fragment="").geturl()


def local_path(path: str) -> str | None:
    """``path`` as a local path when it is one (a plain path or a ``file://`` URI), else None."""
    s = scheme(path)
    if s is None:
        if path[:5].lower() == "file:":  # Hadoop's form of a local URI: file:/tmp/x%20y
            return unquote(path[5:])
        return path
    if s == "file":
        u = urlsplit(path)
        if u.netloc not in ("", "localhost"):
            raise SourceError(f"{shown(path)!r}: a file:// URI names a host; use file:///path")
        return unquote(u.path)
    return None


@dataclass(frozen=True)
class DataFile:
    """One file of a source: ``uri`` names it as the user would (the local path, or the URI
    with its query), ``name`` is the base name used in positions."""

    uri: str
    name: str
    fs: Any = field(default=None, compare=False)  # pyarrow FileSystem; None: local
    path: str = ""  # the path within ``fs`` (the local path when ``fs`` is None)
    raw: str = ""  # a listed file: its URI with the name as is (Spark's form), without query

    def __str__(self) -> str:  # as shown (no query): reopen it by ``uri``
        return shown(self.uri)

    @property
    def spark_uri(self) -> str:
        """What Spark's executors read: the URI without the query (Spark takes filesystem
        options from its own configuration)."""
        if self.fs is None:
            return self.uri
        return self.raw or _strip_query(self.uri)

    @property
    def suffix(self) -> str:
        return Path(self.name).suffix.lower()

    def open_binary(self) -> Any:
        """A seekable binary file (what ``pyarrow.parquet.ParquetFile`` reads)."""
        if self.fs is None:
            return open(self.path, "rb")
        return self.fs.open_input_file(self.path)

    def open_text(self, newline: str | None = None) -> IO[str]:
        if self.fs is None:
            return open(self.path, newline=newline)
        raw = self.fs.open_input_stream(self.path)
        return io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8", newline=newline)

    def parquet(self) -> Any:
        import pyarrow.parquet as pq

        return pq.ParquetFile(self.path if self.fs is None else self.open_binary())


_filesystems: dict[str, Any] = {}
_lock = threading.Lock()


def remote(uri: str) -> tuple[Any, str]:
    """pyarrow's filesystem for ``uri`` (one per scheme, host and query, kept for the process:
    an S3 client resolves its bucket's region over the network once) and the path in it."""
    import pyarrow.fs as pafs

    s = scheme(uri)
    assert s is not None
    target = _ALIASES.get(s, s) + uri[len(s) :]
    u = urlsplit(target)
    key = f"{u.scheme}://{u.netloc}?{u.query}"
    with _lock:
        fs = _filesystems.get(key)
    if fs is not None and u.scheme in _BUCKETS:  # bucket/key: no need to parse it again
        return fs, (u.netloc + unquote(u.path)).rstrip("/")
    try:
        new, path = pafs.FileSystem.from_uri(target)
    except Exception as e:  # pyarrow's words quote the whole URI: show it without secrets
        why = str(e).replace(target, shown(uri)).replace(uri, shown(uri))
        raise SourceError(f"{shown(uri)!r}: cannot open this filesystem: {why}") from None
    with _lock:  # one filesystem (one client, one connection pool) per bucket and options
        return _filesystems.setdefault(key, new), path


_BUCKETS = ("s3", "gs", "gcs")  # pyarrow's path in these: bucket + key, percent-decoded


def _strip_query(uri: str) -> str:
    u = urlsplit(uri)
    return u._replace(query="", fragment="").geturl()


def spark_path(path: str) -> str:
    """``path`` as Spark reads or writes it: a local path decoded (Hadoop keeps a file:// URI's
    %-escapes in the name), a URI without its query (Spark's own configuration applies)."""
    local = local_path(path)
    return local if local is not None else _strip_query(path)


def with_query(path: str, of: str) -> str:
    """``path`` (a URI Spark names) with the query of ``of`` (the URI the user wrote)."""
    q = urlsplit(of).query
    return f"{path}?{q}" if q and scheme(path) not in (None, "file") else path


def source_files(path: str, exts: tuple[str, ...]) -> list[DataFile]:
    """The files a source reads at ``path``: the file itself, or a folder's files with one of
    ``exts`` in name order. Raises :class:`SourceError` when nothing is there."""
    local = local_path(path)
    if local is not None:
        p = Path(local)
        if p.is_dir():
            fs = sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower() in exts)
            return [DataFile(str(f), f.name, None, str(f)) for f in fs]
        if p.is_file():
            return [DataFile(str(p), p.name, None, str(p))]
        raise SourceError(f"no such file or directory: {path}")
    import pyarrow.fs as pafs

    fs, inner = remote(path)
    try:
        info = fs.get_file_info(inner)
        if info.type == pafs.FileType.File:
            return [DataFile(path, info.base_name, fs, inner)]
        if info.type != pafs.FileType.Directory:
            raise SourceError(f"no such file or directory: {shown(path)}")
        found = fs.get_file_info(pafs.FileSelector(inner, recursive=False))
    except SourceError:
        raise
    except Exception as e:
        raise SourceError(f"{shown(path)!r}: cannot list: {e}") from None
    base, q = _strip_query(path).rstrip("/"), urlsplit(path).query
    query = f"?{q}" if q else ""
    # the URI reopens the file through pyarrow, which decodes %-escapes: the name is quoted;
    # Spark (Hadoop's Path) takes the name as it is
    return [
        DataFile(
            f"{base}/{quote(i.base_name)}{query}", i.base_name, fs, i.path, f"{base}/{i.base_name}"
        )
        for i in sorted(found, key=lambda i: i.base_name)
        if i.type == pafs.FileType.File and Path(i.base_name).suffix.lower() in exts
    ]


def is_folder(path: str) -> bool:
    """Whether ``path`` (a path or URI) names a folder."""
    local = local_path(path)
    if local is not None:
        return Path(local).is_dir()
    import pyarrow.fs as pafs

    fs, inner = remote(path)
    try:
        return bool(fs.get_file_info(inner).type == pafs.FileType.Directory)
    except Exception:
        return False


def suffix(path: str) -> str:
    """The extension of a path or URI, lower case, without opening its filesystem."""
    return Path(urlsplit(path).path if scheme(path) else path).suffix.lower()


def folder(path: str) -> tuple[Any, str]:
    """The pyarrow filesystem and the folder in it that a path or URI names (a sink's)."""
    import pyarrow.fs as pafs

    local = local_path(path)
    if local is not None:
        return pafs.LocalFileSystem(), str(Path(local).absolute())
    return remote(path)


def write_file(fs: Any, path: str, tmp: str, write: Callable[[Any], None]) -> None:
    """``write(stream)`` into ``tmp``, then moved to ``path`` (a rename where the filesystem
    has one), so a reader never sees a half-written file."""
    with fs.open_output_stream(tmp) as out:
        write(out)
    fs.move(tmp, path)


def data_file(path: str) -> DataFile:
    """One file named by a path or URI (a file a folder source found, or one Spark names)."""
    local = local_path(path)
    if local is not None:
        return DataFile(local, Path(local).name, None, local)
    fs, inner = remote(path)
    return DataFile(path, inner.rsplit("/", 1)[-1], fs, inner)
