# checkers/: the native DHL raw-tier checker (checkers/native/, called per
# state through ctypes by checkers/dhl_native.py) and its C test, built
# plain and under AddressSanitizer + UBSan, against the real libdhl.
CK_DIR    := checkers
CK_BUILD  := $(CK_DIR)/build
CK_SRC    := $(addprefix $(CK_DIR)/native/,rawcheck.c rawcheck_image.c rawcheck_decode.c)
CK_HDR    := $(CK_DIR)/native/rawcheck.h $(CK_DIR)/native/rawcheck_internal.h
CK_CFLAGS := $(CFLAGS_COMMON) -I$(CK_DIR)/native

$(CK_BUILD)/librawcheck.so: $(CK_SRC) $(CK_HDR) $(CK_DIR)/build.mk
	@mkdir -p $(@D)
	$(CC) $(CK_CFLAGS) -fPIC -shared -o $@ $(CK_SRC)

# The test builds images with the engine (it may include dhl.h; the
# checker may not) and runs the checker on them, intact and damaged.
$(CK_BUILD)/test_rawcheck: $(CK_DIR)/native/test_rawcheck.c $(CK_SRC) $(CK_HDR) $(DHL_SRC) $(DHL_HDR) $(CK_DIR)/build.mk
	@mkdir -p $(@D)
	$(CC) $(CK_CFLAGS) $(ASAN_FLAGS) -I$(DHL_DIR)/include -I$(DHL_DIR)/src -o $@ \
	    $(CK_DIR)/native/test_rawcheck.c $(CK_SRC) $(DHL_SRC) -lxxhash

.PHONY: checkers-ctest
checkers-ctest: $(CK_BUILD)/test_rawcheck
	@echo "checkers-ctest: test_rawcheck (asan+ubsan)"; $(CK_BUILD)/test_rawcheck

BUILD += $(CK_BUILD)/librawcheck.so
CTEST += checkers-ctest
