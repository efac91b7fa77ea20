# harness: the fuse recording daemon (harness/fuse/logfuse.c), and its
# sanitizer build, exercised by a real recording in `make ctest`
# (harness/fuse/ctest.sh; skipped where root, /dev/fuse or loop are missing).
# pkg-config flags use `=` (evaluated when a recipe runs), not `:=`: on a fresh
# machine `make test` parses this file before set-up has installed libfuse3-dev.
FUSE_CFLAGS = $(shell pkg-config --cflags fuse3)
FUSE_LIBS   = $(shell pkg-config --libs fuse3)

LOGFUSE_SRC := $(addprefix harness/fuse/,logfuse.c logfuse_log.c logfuse_requests.c faultrules.c)
LOGFUSE_HDR := $(addprefix harness/fuse/,logfuse.h logwrites.h faultrules.h)

harness/build/logfuse: $(LOGFUSE_SRC) $(LOGFUSE_HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(FUSE_CFLAGS) -o $@ $(LOGFUSE_SRC) $(FUSE_LIBS)

harness/build/logfuse-asan: $(LOGFUSE_SRC) $(LOGFUSE_HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(ASAN_FLAGS) $(FUSE_CFLAGS) -o $@ $(LOGFUSE_SRC) $(FUSE_LIBS)

.PHONY: ctest-logfuse
ctest-logfuse: harness/build/logfuse-asan
	@harness/fuse/ctest.sh harness/build/logfuse-asan

BUILD += harness/build/logfuse harness/build/logfuse-asan
CTEST += ctest-logfuse
