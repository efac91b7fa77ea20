/*
** The op stream reader: the C side of workloads/opstream.py, which is the
** one definition of the format (also described in workloads/README.md).
**
** Header (24 bytes, little-endian): "CLOPSTRM", u32 version (1),
** u32 ntables, u32 ntxns, u32 flags.  Records: u8 type, then
**   BEGIN  u32 txn | INSERT/UPDATE u32 table, i64 key, u32 len, value
**   DELETE/SELECT u32 table, i64 key | COMMIT u32 txn | MARK u8 len, label
**   END u32 ntxns, ntxns x u64 offsets of the BEGINs of txns 1..ntxns.
*/
#ifndef CRASHLAB_OPSTREAM_H
#define CRASHLAB_OPSTREAM_H

#include <stddef.h>
#include <stdint.h>

enum {
    OPS_BEGIN = 1,
    OPS_INSERT,
    OPS_UPDATE,
    OPS_DELETE,
    OPS_SELECT,
    OPS_COMMIT,
    OPS_MARK,
    OPS_END
};

#define OPS_MAX_LABEL 255

typedef struct ops_record {
    int type;
    uint32_t txn;   /* BEGIN, COMMIT; END: number of transactions */
    uint32_t table; /* INSERT..SELECT */
    int64_t key;
    const uint8_t *value; /* INSERT, UPDATE: points into the stream */
    uint32_t len;
    char label[OPS_MAX_LABEL + 1]; /* MARK, NUL-terminated */
} ops_record;

typedef struct ops_stream {
    uint8_t *data; /* the whole file */
    size_t size;
    size_t pos; /* next record */
    int owned;  /* data is ours to free */
    uint32_t ntables;
    uint32_t ntxns;
    uint32_t next_txn; /* the number the next measured BEGIN must carry */
    int in_txn;        /* inside BEGIN..COMMIT */
    uint32_t open_txn;
    int done; /* END seen and validated */
    char err[200];
} ops_stream;

/*
** Load the op stream at PATH and check its header.  Returns 0, or -1 with
** s->err set (ops_close must still be called either way).
*/
int ops_open_file(ops_stream *s, const char *path);

/*
** Use the SIZE bytes at DATA (not copied, not freed) as a stream and check
** its header.  Returns 0, or -1 with s->err set.
*/
int ops_open_buffer(ops_stream *s, const uint8_t *data, size_t size);

/*
** Decode the next record into R, checking structure as it goes (tables in
** range, transactions numbered 1, 2, ..., operations only inside a
** transaction, END's index pointing at those BEGINs, nothing after END).
** Returns 1 for a record (END included), 0 once END has been returned, -1
** on a malformed stream with s->err naming the byte offset.
*/
int ops_next(ops_stream *s, ops_record *r);

/* Free what ops_open_file allocated.  Safe on a zeroed or failed stream. */
void ops_close(ops_stream *s);

#endif
