# dhl/: the DHL engine — libdhl (static + shared), its C tests, and the same
# tests built with gcc under AddressSanitizer + UBSan.
DHL_DIR     := dhl
DHL_BUILD   := $(DHL_DIR)/build
DHL_SRC     := $(sort $(wildcard $(DHL_DIR)/src/*.c))
DHL_HDR     := $(DHL_DIR)/include/dhl.h $(DHL_DIR)/src/internal.h
DHL_CFLAGS  := $(CFLAGS_COMMON) -I$(DHL_DIR)/include -I$(DHL_DIR)/src
DHL_LIBS    := -lxxhash
DHL_TESTS   := $(patsubst $(DHL_DIR)/tests/%.c,%,$(sort $(wildcard $(DHL_DIR)/tests/test_*.c)))
DHL_TEST_HDR := $(wildcard $(DHL_DIR)/tests/*.h)
DHL_OBJ     := $(patsubst $(DHL_DIR)/src/%.c,$(DHL_BUILD)/obj/%.o,$(DHL_SRC))
DHL_ASAN_CC ?= $(CC)

$(DHL_BUILD)/obj/%.o: $(DHL_DIR)/src/%.c $(DHL_HDR) $(DHL_DIR)/build.mk
	@mkdir -p $(@D)
	$(CC) $(DHL_CFLAGS) -fPIC -c -o $@ $<

$(DHL_BUILD)/libdhl.a: $(DHL_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(DHL_BUILD)/libdhl.so: $(DHL_OBJ)
	$(CC) -shared -o $@ $^ $(DHL_LIBS)

$(DHL_BUILD)/%: $(DHL_DIR)/tests/%.c $(DHL_BUILD)/libdhl.a $(DHL_TEST_HDR)
	$(CC) $(DHL_CFLAGS) -o $@ $< $(DHL_BUILD)/libdhl.a $(DHL_LIBS)

# Sanitizer build: the library sources compiled into each test binary.
$(DHL_BUILD)/asan/%: $(DHL_DIR)/tests/%.c $(DHL_SRC) $(DHL_HDR) $(DHL_TEST_HDR) $(DHL_DIR)/build.mk
	@mkdir -p $(@D)
	$(DHL_ASAN_CC) $(DHL_CFLAGS) $(ASAN_FLAGS) -o $@ $< $(DHL_SRC) $(DHL_LIBS)

.PHONY: dhl-ctest
dhl-ctest: $(addprefix $(DHL_BUILD)/,$(DHL_TESTS)) $(addprefix $(DHL_BUILD)/asan/,$(DHL_TESTS))
	@set -e; for t in $(DHL_TESTS); do \
	  echo "dhl-ctest: $$t"; $(DHL_BUILD)/$$t; \
	  echo "dhl-ctest: $$t (asan+ubsan)"; DHL_TEST_QUICK=1 $(DHL_BUILD)/asan/$$t; done

BUILD += $(DHL_BUILD)/libdhl.a $(DHL_BUILD)/libdhl.so
BUILD += $(addprefix $(DHL_BUILD)/,$(DHL_TESTS)) $(addprefix $(DHL_BUILD)/asan/,$(DHL_TESTS))
CTEST += dhl-ctest
