"""File bodies from the Hub or a mirror: one GET each, hashed as the bytes arrive; Xet files via hf_xet."""

from __future__ import annotations

import http.client
import urllib.error
import urllib.request
from urllib.parse import quote, urlsplit

from hgxkit.model import core

from .errors import FetchError, XetFile
from .filelist import HubAnswer, _answer_error
from .partial import Partial, pump


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follow the Hub's redirects; the token goes along only while the origin stays the Hub's (never to a CDN);
    an answer that names a Xet hash stops here (XetFile) when Xet files go through hf_xet."""

    def __init__(self, origin: str, token: str | None, xet: bool) -> None:
        self.origin, self.token, self.xet = origin, token, xet

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        if self.xet and headers.get("X-Xet-Hash"):
            raise XetFile(newurl)
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and self.token and _same_origin(newurl, self.origin):
            new.add_unredirected_header("Authorization", f"Bearer {self.token}")
        return new


class HubBodies:
    """File bodies from the Hub or a mirror.

    Each file is one GET of its /resolve/ URL at the commit, following the Hub's redirect to its storage, as
    `curl -L` would (two requests per LFS file, the token never leaving the Hub's origin); the bytes are hashed
    as they arrive and a partial file resumes with a Range. This part is hand-rolled on purpose:
    huggingface_hub 2.x has no hook to hash the bytes as they arrive (its callers read each file again), keeps
    no partial file between runs, and spends its CPU per 64 KB in httpx/h11 (bench/model_profile.py: 75% of the
    sync's thread time before this, against 8 curls 5-7x faster). A file the Hub keeps in Xet storage (its
    answer names an X-Xet-Hash) goes to huggingface_hub's own downloader instead (hf_xet: chunked, parallel,
    deduplicated), and is hashed right after it lands."""

    def __init__(self, spec: core.Spec, token: str | None, commit: str) -> None:
        self.spec, self.token, self.commit = spec, token, commit
        self._opener = urllib.request.build_opener(_Redirects(spec.where, token, spec.xet))

    def url(self, meta: core.FileMeta) -> str:
        return f"{self.spec.where.rstrip('/')}/{self.spec.repo_id}/resolve/{self.commit}/{quote(meta.path)}"

    def _request(self, meta: core.FileMeta, method: str, headers: dict[str, str]) -> urllib.request.Request:
        req = urllib.request.Request(self.url(meta), method=method, headers={"User-Agent": "hgxkit-fetch/2", **headers})
        if self.token:
            req.add_unredirected_header("Authorization", f"Bearer {self.token}")
        return req

    def _error(self, err: urllib.error.HTTPError, meta: core.FileMeta) -> FetchError:
        code = err.headers.get("X-Error-Code", "") if err.headers else ""
        if code in ("GatedRepo", "RepoNotFound", "RevisionNotFound"):
            return _answer_error(HubAnswer(err.code, code, ""), self.spec)
        if code == "EntryNotFound" or (err.code == 404 and _same_origin(err.url or "", self.spec.where)):
            return FetchError(
                f"{meta.path}: not in {self.spec.repo_id}@{self.commit[:12]} at {self.spec.where}: re-run"
            )
        if err.code in (401, 403) and _same_origin(err.url or "", self.spec.where):
            return FetchError(f"{self.spec.where} refused {meta.path} (HTTP {err.code}): check HF_TOKEN's access")
        transient = err.code in (403, 404, 408, 416, 429) or err.code >= 500  # off the Hub: a signed URL expired?
        return FetchError(f"{err.url or self.spec.where} answered HTTP {err.code} for {meta.path}", transient=transient)

    def in_xet(self, meta: core.FileMeta) -> bool:
        """Whether the Hub keeps `meta` in Xet storage: one HEAD of its /resolve/ URL, its redirect not followed."""
        req = self._request(meta, "HEAD", {})
        opener = urllib.request.build_opener(_NoRedirects())
        try:
            with opener.open(req, timeout=30) as resp:
                return bool(resp.headers.get("X-Xet-Hash"))
        except urllib.error.HTTPError as err:
            if 300 <= err.code < 400:
                return bool(err.headers.get("X-Xet-Hash"))
            raise self._error(err, meta) from None
        except OSError as err:
            raise FetchError(
                f"network failure asking {self.spec.where} for {meta.path}: {err}", transient=True
            ) from None

    def stream(self, meta: core.FileMeta, part: Partial) -> None:
        """One GET of the rest of the file into `part` (Range from its offset); a FetchError when it fails."""
        part.open()
        req = self._request(
            meta, "GET", {"Accept-Encoding": "identity", **({"Range": f"bytes={part.offset}-"} if part.offset else {})}
        )
        try:
            resp = self._opener.open(req, timeout=60)
        except urllib.error.HTTPError as err:
            if err.code == 416:
                part.restart()
            raise self._error(err, meta) from None
        except XetFile:
            raise
        except OSError as err:
            raise FetchError(
                f"network failure fetching {meta.path} from {self.spec.where}: {err}", transient=True
            ) from None
        with resp:
            if part.offset and resp.status != 206:
                part.restart()  # the server ignored the Range: take the whole file
            elif part.offset and not str(resp.headers.get("Content-Range", "")).startswith(f"bytes {part.offset}-"):
                part.restart()
                raise FetchError(f"{meta.path}: the server answered another range than asked", transient=True)
            try:
                pump(resp.readinto, part, meta.size - part.offset, f"fetching {meta.path}")
            except (OSError, http.client.HTTPException) as err:
                raise FetchError(f"fetching {meta.path} from {self.spec.where}: {err}", transient=True) from None

    def fetch_xet(self, meta: core.FileMeta, local_dir: str) -> None:
        """huggingface_hub's downloader with hf_xet (its caches and settings from the spec's xet_env), into
        `local_dir` (a fresh staging directory: huggingface_hub opens files by path)."""
        from huggingface_hub import hf_hub_download

        hf_hub_download(
            self.spec.repo_id,
            meta.path,
            revision=self.commit,
            local_dir=local_dir,
            endpoint=self.spec.endpoint or None,
            token=self.token or False,
        )


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None


def _same_origin(url: str, base: str) -> bool:
    a, b = urlsplit(url), urlsplit(base)
    return (a.scheme, a.netloc) == (b.scheme, b.netloc)
