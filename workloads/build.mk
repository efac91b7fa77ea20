# workloads/: the C workload runner (crashlab-runner) and its C unit test.
# The runner links libdhl (dhl/build.mk) for its DHL engine: the library is a
# prerequisite, so `make build` builds dhl before the runner.
WL_DIR      := workloads
WL_BUILD    := $(WL_DIR)/build
WL_SRC      := $(addprefix $(WL_DIR)/runner/,main.c cmdline.c opstream.c marks.c vfsshim.c countvfs.c cksumvfs.c dashvfs.c waldiovfs.c selvfs.c engine_sqlite.c engine_dhl.c batchvfs.c)
WL_HDR      := $(wildcard $(WL_DIR)/runner/*.h)
WL_SQLITE_CFLAGS = $(shell pkg-config --cflags sqlite3 2>/dev/null)
WL_SQLITE_LIBS   = $(shell pkg-config --libs sqlite3 2>/dev/null || echo -lsqlite3)
WL_DHL_CFLAGS := -Idhl/include
WL_DHL_LIB    := dhl/build/libdhl.a
WL_DHL_LIBS   := -lxxhash
# The ASan build compiles libdhl's sources in, so the engine is checked too.
WL_DHL_SRC    := $(sort $(wildcard dhl/src/*.c))
# The pass-through base every VFS shim is built on (vfsshim.h), and the WAL
# checksum the shims that write frames or page checksums share (walsum.h).
WL_SHIM     := $(WL_DIR)/runner/vfsshim.c $(WL_DIR)/runner/vfsshim.h $(WL_DIR)/runner/walsum.h
WL_TEST_SRC := $(WL_DIR)/runner/test_runner.c $(WL_DIR)/runner/opstream.c $(WL_DIR)/runner/marks.c

$(WL_BUILD)/crashlab-runner: $(WL_SRC) $(WL_HDR) $(WL_DIR)/build.mk $(WL_DHL_LIB) dhl/include/dhl.h
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) $(WL_SQLITE_CFLAGS) $(WL_DHL_CFLAGS) -o $@ $(WL_SRC) $(WL_DHL_LIB) \
	    $(WL_SQLITE_LIBS) $(WL_DHL_LIBS)

# The same runner under AddressSanitizer + UBSan (the pytest suite runs one
# clean workload through it) and the C unit tests of the stream reader and
# marks, and of the checksum VFS.
$(WL_BUILD)/crashlab-runner-asan: $(WL_SRC) $(WL_HDR) $(WL_DIR)/build.mk $(WL_DHL_SRC) dhl/include/dhl.h dhl/src/internal.h
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) $(ASAN_FLAGS) $(WL_SQLITE_CFLAGS) $(WL_DHL_CFLAGS) -Idhl/src -o $@ \
	    $(WL_SRC) $(WL_DHL_SRC) $(WL_SQLITE_LIBS) $(WL_DHL_LIBS)

$(WL_BUILD)/test_runner: $(WL_TEST_SRC) $(WL_HDR) $(WL_DIR)/build.mk
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) $(ASAN_FLAGS) -o $@ $(WL_TEST_SRC)

# The checksum VFS as a shared library over the system SQLite: the checkers
# load it (ctypes) to open a checksummed database as the SUT does
# (workloads/vfs.py).
$(WL_BUILD)/libcrashlab-cksumvfs.so: $(WL_DIR)/runner/cksumvfs.c $(WL_DIR)/runner/cksumvfs.h $(WL_SHIM) $(WL_DIR)/build.mk
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) -fPIC -shared $(WL_SQLITE_CFLAGS) -o $@ $(WL_DIR)/runner/cksumvfs.c \
	    $(WL_DIR)/runner/vfsshim.c $(WL_SQLITE_LIBS)

$(WL_BUILD)/test_cksumvfs: $(WL_DIR)/runner/test_cksumvfs.c $(WL_DIR)/runner/cksumvfs.c $(WL_DIR)/runner/cksumvfs.h $(WL_SHIM) $(WL_DIR)/build.mk
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) $(ASAN_FLAGS) $(WL_SQLITE_CFLAGS) -o $@ $(WL_DIR)/runner/test_cksumvfs.c \
	    $(WL_DIR)/runner/cksumvfs.c $(WL_DIR)/runner/vfsshim.c $(WL_SQLITE_LIBS)

# The DASH VFS alone over the unix VFS (dashvfs.h).
$(WL_BUILD)/test_dashvfs: $(WL_DIR)/runner/test_dashvfs.c $(WL_DIR)/runner/dashvfs.c $(WL_DIR)/runner/dashvfs.h $(WL_SHIM) $(WL_DIR)/build.mk
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) $(ASAN_FLAGS) $(WL_SQLITE_CFLAGS) -o $@ $(WL_DIR)/runner/test_dashvfs.c \
	    $(WL_DIR)/runner/dashvfs.c $(WL_DIR)/runner/vfsshim.c $(WL_SQLITE_LIBS)

# The C tests' shared CHECK and helpers.
$(WL_BUILD)/test_cksumvfs $(WL_BUILD)/test_dashvfs $(WL_BUILD)/test_waldiovfs: $(WL_DIR)/runner/testutil.h

.PHONY: workloads-ctest
workloads-ctest: $(WL_BUILD)/test_runner $(WL_BUILD)/test_cksumvfs $(WL_BUILD)/test_dashvfs $(WL_BUILD)/test_waldiovfs
	$(WL_BUILD)/test_runner
	$(WL_BUILD)/test_cksumvfs
	$(WL_BUILD)/test_dashvfs
	$(WL_BUILD)/test_waldiovfs $(WL_BUILD)

# The WALDIO VFS (waldiovfs.h): the shared library the checkers open a
# WALDIO database through (workloads/vfs.py), and its unit test.
$(WL_BUILD)/libcrashlab-waldiovfs.so: $(WL_DIR)/runner/waldiovfs.c $(WL_DIR)/runner/waldiovfs.h $(WL_SHIM) $(WL_DIR)/build.mk
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) -fPIC -shared $(WL_SQLITE_CFLAGS) -o $@ $(WL_DIR)/runner/waldiovfs.c \
	    $(WL_DIR)/runner/vfsshim.c $(WL_SQLITE_LIBS)

$(WL_BUILD)/test_waldiovfs: $(WL_DIR)/runner/test_waldiovfs.c $(WL_DIR)/runner/waldiovfs.c $(WL_DIR)/runner/waldiovfs.h $(WL_SHIM) $(WL_DIR)/build.mk
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) $(ASAN_FLAGS) $(WL_SQLITE_CFLAGS) -o $@ $(WL_DIR)/runner/test_waldiovfs.c \
	    $(WL_DIR)/runner/waldiovfs.c $(WL_DIR)/runner/vfsshim.c $(WL_SQLITE_LIBS)

BUILD += $(WL_BUILD)/crashlab-runner $(WL_BUILD)/crashlab-runner-asan $(WL_BUILD)/libcrashlab-cksumvfs.so
BUILD += $(WL_BUILD)/libcrashlab-waldiovfs.so
CTEST += workloads-ctest

# xLog (workloads/runner/xlog.c, the engine `xlog`, over its NVRAM format,
# xlog_format.c): part of the runner; its recovery alone as
# crashlab-xlog-recover (the checkers replay each crash state's NVRAM with
# it); its record format's unit test, under ASan+UBSan.
WL_XLOG_SRC := $(addprefix $(WL_DIR)/runner/,xlog.c xlog_format.c countvfs.c vfsshim.c)
WL_SRC += $(WL_DIR)/runner/xlog.c $(WL_DIR)/runner/xlog_format.c
$(WL_BUILD)/crashlab-runner $(WL_BUILD)/crashlab-runner-asan: $(WL_DIR)/runner/xlog.c $(WL_DIR)/runner/xlog_format.c

$(WL_BUILD)/crashlab-xlog-recover: $(WL_DIR)/runner/xlog_recover.c $(WL_XLOG_SRC) $(WL_HDR) $(WL_DIR)/build.mk
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) $(WL_SQLITE_CFLAGS) -o $@ $(WL_DIR)/runner/xlog_recover.c \
	    $(WL_XLOG_SRC) $(WL_SQLITE_LIBS)

$(WL_BUILD)/test_xlog: $(WL_DIR)/runner/test_xlog.c $(WL_XLOG_SRC) $(WL_HDR) $(WL_DIR)/build.mk
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) $(ASAN_FLAGS) $(WL_SQLITE_CFLAGS) -o $@ $(WL_DIR)/runner/test_xlog.c \
	    $(WL_XLOG_SRC) $(WL_SQLITE_LIBS)

.PHONY: workloads-ctest-xlog
workloads-ctest-xlog: $(WL_BUILD)/test_xlog
	$(WL_BUILD)/test_xlog

BUILD += $(WL_BUILD)/crashlab-xlog-recover
CTEST += workloads-ctest-xlog
# The selective-journaling VFS (runner/selvfs.h) as a shared library: the
# checkers open a selective SUT's database through it (workloads/vfs.py);
# its C test runs under ASan.
$(WL_BUILD)/libcrashlab-selvfs.so: $(WL_DIR)/runner/selvfs.c $(WL_DIR)/runner/selvfs.h $(WL_SHIM) $(WL_DIR)/build.mk
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) -fPIC -shared $(WL_SQLITE_CFLAGS) -o $@ $(WL_DIR)/runner/selvfs.c \
	    $(WL_DIR)/runner/vfsshim.c $(WL_SQLITE_LIBS)

$(WL_BUILD)/test_selvfs: $(WL_DIR)/runner/test_selvfs.c $(WL_DIR)/runner/selvfs.c $(WL_DIR)/runner/selvfs.h $(WL_SHIM) $(WL_DIR)/runner/testutil.h $(WL_DIR)/build.mk
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) $(ASAN_FLAGS) $(WL_SQLITE_CFLAGS) -o $@ $(WL_DIR)/runner/test_selvfs.c \
	    $(WL_DIR)/runner/selvfs.c $(WL_DIR)/runner/vfsshim.c $(WL_SQLITE_LIBS)

.PHONY: selvfs-ctest
selvfs-ctest: $(WL_BUILD)/test_selvfs
	$(WL_BUILD)/test_selvfs

BUILD += $(WL_BUILD)/libcrashlab-selvfs.so
CTEST += selvfs-ctest

# MAW: the same runner compiled against SQLite's own amalgamation (pinned;
# set-up fetches it into the cache, never into the repo:
# harness/setup/sqlite-amalgamation.sh) with SQLITE_ENABLE_BATCH_ATOMIC_WRITE,
# which Debian's libsqlite3 lacks: on F2FS its pager commits through
# F2FS_IOC_START/COMMIT_ATOMIC_WRITE.  The I/O-relevant options of Debian's
# build are kept (secure delete, 4096-byte sectors, fdatasync), so it writes
# what the system SQLite writes except where batch atomic write differs.
MAW_SQLITE_VERSION := 3.50.4
MAW_CACHE      := $(or $(CRASHLAB_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/crashlab)
MAW_SQLITE_DIR := $(MAW_CACHE)/sqlite-amalgamation/$(MAW_SQLITE_VERSION)
MAW_SQLITE_DEFS := -DSQLITE_ENABLE_BATCH_ATOMIC_WRITE -DSQLITE_SECURE_DELETE \
    -DSQLITE_DEFAULT_SECTOR_SIZE=4096 -DHAVE_FDATASYNC=1 -DHAVE_USLEEP=1

$(MAW_SQLITE_DIR)/sqlite3.c $(MAW_SQLITE_DIR)/sqlite3.h &:
	harness/setup/sqlite-amalgamation.sh "$(MAW_SQLITE_DIR)" >/dev/null

# SQLite's code, not ours: its own warnings are not errors here.
$(WL_BUILD)/maw/sqlite3.o: $(MAW_SQLITE_DIR)/sqlite3.c $(MAW_SQLITE_DIR)/sqlite3.h $(WL_DIR)/build.mk
	@mkdir -p $(WL_BUILD)/maw
	$(CC) -O2 -g -D_GNU_SOURCE $(MAW_SQLITE_DEFS) -c -o $@ $<

$(WL_BUILD)/crashlab-runner-maw: $(WL_SRC) $(WL_HDR) $(WL_DIR)/build.mk $(WL_DHL_LIB) dhl/include/dhl.h $(WL_BUILD)/maw/sqlite3.o
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) -I$(MAW_SQLITE_DIR) $(WL_DHL_CFLAGS) -o $@ $(WL_SRC) \
	    $(WL_BUILD)/maw/sqlite3.o $(WL_DHL_LIB) $(WL_DHL_LIBS) -lpthread -ldl -lm

BUILD += $(WL_BUILD)/crashlab-runner-maw

# The batch-atomic-write watch's C unit test (against the system SQLite,
# under ASan+UBSan): a commit outside an atomic batch fails its check.
$(WL_BUILD)/test_batchvfs: $(WL_DIR)/runner/test_batchvfs.c $(WL_DIR)/runner/batchvfs.c $(WL_DIR)/runner/countvfs.c $(WL_DIR)/runner/vfsshim.c $(WL_HDR) $(WL_DIR)/build.mk
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) $(ASAN_FLAGS) $(WL_SQLITE_CFLAGS) -o $@ $(WL_DIR)/runner/test_batchvfs.c \
	    $(WL_DIR)/runner/batchvfs.c $(WL_DIR)/runner/countvfs.c $(WL_DIR)/runner/vfsshim.c $(WL_SQLITE_LIBS)

.PHONY: workloads-ctest-maw
workloads-ctest-maw: $(WL_BUILD)/test_batchvfs
	$(WL_BUILD)/test_batchvfs

CTEST += workloads-ctest-maw

# crashlab-jlang: a j-lang program (workloads/jlang/) run in the recorded
# file system with crashlab's marks (workloads/runner/jlang.c).
$(WL_BUILD)/crashlab-jlang: $(WL_DIR)/runner/jlang.c $(WL_DIR)/runner/marks.c $(WL_DIR)/runner/marks.h $(WL_DIR)/build.mk
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) -o $@ $(WL_DIR)/runner/jlang.c $(WL_DIR)/runner/marks.c

BUILD += $(WL_BUILD)/crashlab-jlang
