#!/usr/bin/env python3
"""faultfs: a FUSE file system that passes everything through to a backing directory, except that
writes to (or reads of) the files named in BACKING/.faults fail. Tests put keel's state directory on it
to see the kernel return an I/O error from write(2) or fsync(2) on the journal (this machine has no
device-mapper or fault-injection support to make a block device fail), and a cgroup tree in the
kernel's file formats on it to see a read fail as cgroupfs fails it (ENODEV while a cgroup is being
removed).

  faultfs.py BACKING MOUNTPOINT      (runs in the foreground until unmounted)

BACKING/.faults, re-read at every write and read: one rule per line, "NAME ERRNO [PASS]": writes and
fsyncs of files named NAME (the last path component, or the path below the mount point) fail with
ERRNO (a number, e.g. 5 for EIO) after PASS more writes went through (default 0); "read:NAME ERRNO
[PASS]": the same for reads. Every refused call is counted in BACKING/.faults.hits (one line each).
"""
import errno
import os
import sys

try:
    from fusepy import FUSE, FuseOSError, Operations  # Debian's python3-fusepy
except ImportError:
    from fuse import FUSE, FuseOSError, Operations


class FaultFs(Operations):
    def __init__(self, root):
        self.root = os.path.realpath(root)
        self.passed = {}

    def _full(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def _fault(self, path, op=""):
        name = op + os.path.basename(path)
        try:
            with open(os.path.join(self.root, ".faults")) as f:
                rules = [line.split() for line in f if line.strip()]
        except FileNotFoundError:
            return
        for r in rules:
            if r[0] not in (name, op + path.lstrip("/")):
                continue
            budget = int(r[2]) if len(r) > 2 else 0
            done = self.passed.get(r[0], 0)
            if done < budget:
                self.passed[r[0]] = done + 1
                return
            with open(os.path.join(self.root, ".faults.hits"), "a") as h:
                h.write(r[0] + "\n")
            raise FuseOSError(int(r[1]))

    def _os(self, fn, *args):
        try:
            return fn(*args)
        except OSError as e:
            raise FuseOSError(e.errno)

    # Metadata.
    def access(self, path, mode):
        if not os.access(self._full(path), mode):
            raise FuseOSError(errno.EACCES)

    def getattr(self, path, fh=None):
        st = self._os(os.lstat, self._full(path))
        keys = ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size", "st_uid", "st_ino")
        return {k: getattr(st, k) for k in keys}

    def chmod(self, path, mode):
        return self._os(os.chmod, self._full(path), mode)

    def chown(self, path, uid, gid):
        return self._os(os.lchown, self._full(path), uid, gid)

    def utimens(self, path, times=None):
        return self._os(os.utime, self._full(path), times)

    def readdir(self, path, fh):
        return [".", ".."] + self._os(os.listdir, self._full(path))

    def readlink(self, path):
        return self._os(os.readlink, self._full(path))

    def statfs(self, path):
        s = self._os(os.statvfs, self._full(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag",
                "f_frsize", "f_namemax")
        return {k: getattr(s, k) for k in keys}

    # Names.
    def mkdir(self, path, mode):
        return self._os(os.mkdir, self._full(path), mode)

    def rmdir(self, path):
        return self._os(os.rmdir, self._full(path))

    def unlink(self, path):
        return self._os(os.unlink, self._full(path))

    def symlink(self, name, target):
        return self._os(os.symlink, target, self._full(name))

    def rename(self, old, new):
        return self._os(os.rename, self._full(old), self._full(new))

    def link(self, target, name):
        return self._os(os.link, self._full(name), self._full(target))

    # Files.
    def open(self, path, flags):
        return self._os(os.open, self._full(path), flags)

    def create(self, path, mode, fi=None):
        return self._os(os.open, self._full(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)

    def read(self, path, length, offset, fh):
        self._fault(path, "read:")
        return self._os(os.pread, fh, length, offset)

    def write(self, path, buf, offset, fh):
        self._fault(path)
        return self._os(os.pwrite, fh, buf, offset)

    def truncate(self, path, length, fh=None):
        if fh is not None:
            return self._os(os.ftruncate, fh, length)
        with open(self._full(path), "r+") as f:
            f.truncate(length)

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        return self._os(os.close, fh)

    def fsync(self, path, datasync, fh):
        self._fault(path)
        return self._os(os.fdatasync if datasync else os.fsync, fh)

    def fsyncdir(self, path, datasync, fh):
        return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    FUSE(FaultFs(sys.argv[1]), sys.argv[2], foreground=True, nothreads=True, allow_other=True,
         default_permissions=True, use_ino=True)
