# harness: the fuse recording daemon (harness/fuse/logfuse.c).
FUSE_CFLAGS := $(shell pkg-config --cflags fuse3)
FUSE_LIBS   := $(shell pkg-config --libs fuse3)

harness/build/logfuse: harness/fuse/logfuse.c harness/fuse/logwrites.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(FUSE_CFLAGS) -o $@ $< $(FUSE_LIBS)

BUILD += harness/build/logfuse
