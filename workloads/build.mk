# workloads/: the C workload runner (crashlab-runner) and its C unit test.
WL_DIR      := workloads
WL_BUILD    := $(WL_DIR)/build
WL_SRC      := $(addprefix $(WL_DIR)/runner/,main.c opstream.c marks.c countvfs.c engine_sqlite.c)
WL_HDR      := $(wildcard $(WL_DIR)/runner/*.h)
WL_SQLITE_CFLAGS := $(shell pkg-config --cflags sqlite3 2>/dev/null)
WL_SQLITE_LIBS   := $(shell pkg-config --libs sqlite3 2>/dev/null || echo -lsqlite3)
WL_TEST_SRC := $(WL_DIR)/runner/test_runner.c $(WL_DIR)/runner/opstream.c $(WL_DIR)/runner/marks.c

$(WL_BUILD)/crashlab-runner: $(WL_SRC) $(WL_HDR) $(WL_DIR)/build.mk
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) $(WL_SQLITE_CFLAGS) -o $@ $(WL_SRC) $(WL_SQLITE_LIBS)

# The same runner under AddressSanitizer + UBSan (the pytest suite runs one
# clean workload through it) and the C unit test of the stream reader and marks.
$(WL_BUILD)/crashlab-runner-asan: $(WL_SRC) $(WL_HDR) $(WL_DIR)/build.mk
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) $(ASAN_FLAGS) $(WL_SQLITE_CFLAGS) -o $@ $(WL_SRC) $(WL_SQLITE_LIBS)

$(WL_BUILD)/test_runner: $(WL_TEST_SRC) $(WL_HDR) $(WL_DIR)/build.mk
	@mkdir -p $(WL_BUILD)
	$(CC) $(CFLAGS_COMMON) $(ASAN_FLAGS) -o $@ $(WL_TEST_SRC)

.PHONY: workloads-ctest
workloads-ctest: $(WL_BUILD)/test_runner
	$(WL_BUILD)/test_runner

BUILD += $(WL_BUILD)/crashlab-runner $(WL_BUILD)/crashlab-runner-asan
CTEST += workloads-ctest
