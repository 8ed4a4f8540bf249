/*
 * lodevem_icount: a QEMU TCG plugin (qemu-user 7.2, plugin API v1) that counts the guest's
 * executed instructions by class, per vCPU (= per guest thread in qemu-user), and snapshots the
 * counters whenever the guest makes a marker system call, so the host can take the difference
 * between two markers: one steady-state inference, with interpreter start, model load and the
 * first inference's weight packing left out.
 *
 * Written for lodevem (not derived from QEMU's example plugins). It is compiled at image build
 * time against include/qemu/qemu-plugin.h from Debian's qemu source package (the header is not
 * in the repository); see Dockerfile.armsim.
 *
 * Why a TB callback, not inline counters: plugin API v1 (QEMU 7.2) has inline adds only on one
 * global address, so they cannot be per thread; a callback per executed translation block adds
 * that block's precomputed class counts to the running vCPU's row (a block that exits early, e.g.
 * on a fault, is over-counted by its tail: rare in user mode, and identical run to run).
 *
 * Classes are decided once per instruction at translation time: A64 from the encoding (capstone 4
 * cannot disassemble ARMv8.2 fp16/dot-product instructions), A32/T32 from capstone's disassembly
 * (qemu_plugin_insn_disas):
 *   simd_arith   NEON / floating-point data processing (incl. moves between SIMD registers)
 *   simd_fp16    subset of simd_arith: half-precision arithmetic (.8h/.4h/h-register f*, .f16)
 *   simd_dot     subset of simd_arith: dot products (sdot, udot, usdot, sudot, vsdot, vudot)
 *   simd_load    loads into SIMD/FP registers          simd_store   stores from them
 *   scalar_load  loads into general registers          scalar_store stores from them
 *   int_alu      scalar integer data processing        branch       branches, calls, returns
 *   other        system, barriers, hints, prefetch, anything unrecognised
 * Bytes loaded/stored come from memory callbacks (arg mem=on), which cost extra emulation time.
 *
 * Arguments: out=FILE (required; marker snapshots are appended), sysno=N (the marker syscall's
 * number for this guest), magic=N (the first argument that makes that syscall a marker: the
 * marker id is a1 - magic, 0..255), mem=on|off, dump=FILE (one line per translated
 * instruction: class and disassembly, for tests and for auditing the classifier),
 * blocks=FILE (the block profile, below).
 *
 * Output lines:  mark <id> <vcpus>\n  then per vCPU:  vcpu <i> <11 counts> <bytes_r> <bytes_w>\n
 * and at exit the same block with id "exit".
 *
 * Block profile (blocks=FILE): why: a count per instruction class cannot price code whose
 * instructions-per-cycle differ (hand-scheduled in-order kernels vs generic ones); the blocks the
 * runtime executed, with their bytes, can be costed by a pipeline model on the host. Every
 * translation block keeps an execution count per vCPU slot (the same TB callback; slots past
 * MAX_BLOCK_VCPUS - 1 share the last one). At every marker with id >= 2 the file gets
 *   blocks <id> <vcpus>\n  then per block executed since the previous marker:
 *   tb <start vaddr hex> <n insns> <raw bytes hex> <count vCPU 0> ... <count vCPU vcpus-1>\n
 *   end <id>\n
 * (32-bit guests: "tb32 <start> <a|t> <n insns> <bytes> <counts...>", a for A32, t for T32.)
 * (the first marker, id 1, only resets the counts: what ran before it is start-up and loading).
 * A guest address translated twice (a flushed or re-translated block) gives two lines; the host
 * merges them. Translation blocks are not always basic blocks (qemu ends a TB at a page boundary
 * or an instruction limit too).
 */
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

enum { SIMD_ARITH, SIMD_FP16, SIMD_DOT, SIMD_LOAD, SIMD_STORE, SCALAR_LOAD, SCALAR_STORE,
       INT_ALU, BRANCH, OTHER, TOTAL, NCLASS };
static const char *class_names[NCLASS] = {
    "simd_arith", "simd_fp16", "simd_dot", "simd_load", "simd_store", "scalar_load",
    "scalar_store", "int_alu", "branch", "other", "total"};

#define MAX_VCPUS 256
#define MAX_MARK 256

typedef struct {
    uint64_t n[NCLASS];
    uint64_t bytes_r, bytes_w;
    char pad[64];  /* keep two threads' rows off one cache line */
} Row;

static Row rows[MAX_VCPUS];
static unsigned int vcpus_seen;
static FILE *out;
static FILE *dump;
static GMutex out_lock;
static int64_t marker_sysno = -1;
static uint64_t marker_magic;
static bool count_mem;
static bool is_a64;

/* ---- block profile ---- */
#define MAX_BLOCK_VCPUS 16

typedef struct Block {
    uint64_t vaddr;
    uint32_t n_insns, n_bytes;
    bool thumb;  /* 32-bit guests: a T32 block (else A32) */
    uint64_t count[MAX_BLOCK_VCPUS];  /* executions since start, per vCPU slot */
    uint64_t base[MAX_BLOCK_VCPUS];   /* the counts at the previous marker */
    struct Block *next;
    uint8_t bytes[];
} Block;

static FILE *blocks_out;
static Block *blocks_head;
static GMutex blocks_lock;

static unsigned int slot(unsigned int vcpu)
{
    unsigned int i = vcpu < MAX_VCPUS ? vcpu : MAX_VCPUS - 1;
    if (i + 1 > __atomic_load_n(&vcpus_seen, __ATOMIC_RELAXED)) {
        __atomic_store_n(&vcpus_seen, i + 1, __ATOMIC_RELAXED);
    }
    return i;
}

/* ---- A64: classification from the encoding (Arm ARM, "A64 instruction set encoding") ----
 * Capstone 4 (what Debian's qemu 7.2 disassembles with) prints ARMv8.2 half-precision and
 * dot-product instructions as ".byte": the encoding is the reliable source for A64. */

static bool bits(uint32_t w, int hi, int lo, uint32_t value)
{
    return ((w >> lo) & ((1u << (hi - lo + 1)) - 1)) == value;
}

static bool a64_fp16(uint32_t w)
{
    bool vector = bits(w, 31, 31, 0);            /* Advanced SIMD vector forms: 0 Q U ... */
    bool simd_scalar = bits(w, 31, 30, 1);       /* Advanced SIMD scalar forms: 0 1 U ... */
    /* scalar FP data processing (M 0 S 11110 ftype 1) and FMADD family (M 0 S 11111 ftype),
     * ftype == 11 (half); not FCVT between precisions (1-source opcode 0001xx) */
    if (bits(w, 31, 30, 0) && bits(w, 23, 22, 3) &&
        ((bits(w, 28, 24, 0x1e) && bits(w, 21, 21, 1) && !bits(w, 20, 17, 0x1)) || bits(w, 28, 24, 0x1f))) {
        return true;
    }
    bool simd_vec = vector && bits(w, 28, 24, 0x0e), simd_sc = simd_scalar && bits(w, 28, 24, 0x1e);
    /* three same (FP16): a 10 Rm 00 opcode 1 */
    if ((simd_vec || simd_sc) && bits(w, 22, 21, 2) && bits(w, 15, 14, 0) && bits(w, 10, 10, 1)) {
        return true;
    }
    /* two-register miscellaneous (FP16): a 1111 00 opcode 10 */
    if ((simd_vec || simd_sc) && bits(w, 22, 17, 0x3c) && bits(w, 11, 10, 2)) {
        return true;
    }
    /* by element, size 00, FP opcode (FMLA 0001, FMLS 0101, FMUL/FMULX 1001) */
    if (((vector && bits(w, 28, 24, 0x0f)) || (simd_scalar && bits(w, 28, 24, 0x1f))) && bits(w, 23, 22, 0) &&
        bits(w, 10, 10, 0) && (bits(w, 15, 12, 0x1) || bits(w, 15, 12, 0x5) || bits(w, 15, 12, 0x9))) {
        return true;
    }
    return false;
}

static bool a64_dot(uint32_t w)
{
    /* SDOT/UDOT (vector): 0 Q U 01110 10 0 Rm 100101; (by element): 0 Q U 01111 10 L M Rm 1110 H 0 */
    return (bits(w, 31, 31, 0) && bits(w, 28, 21, 0x74) && bits(w, 15, 10, 0x25)) ||
           (bits(w, 31, 31, 0) && bits(w, 28, 22, 0x3e) && bits(w, 15, 12, 0xe) && bits(w, 10, 10, 0));
}

static int a64_load_store(uint32_t w)
{
    bool simd = bits(w, 26, 26, 1);
    bool load = bits(w, 22, 22, 1);
    if (bits(w, 29, 28, 1) && bits(w, 25, 24, 0)) {  /* load register (literal) */
        return (!simd && bits(w, 31, 30, 3)) ? OTHER /* PRFM */ : (simd ? SIMD_LOAD : SCALAR_LOAD);
    }
    if (bits(w, 29, 28, 3) && !simd) {  /* load/store register: opc = 23:22 */
        if (bits(w, 25, 24, 0) && bits(w, 21, 21, 1) && bits(w, 11, 10, 0)) {
            return SCALAR_LOAD;  /* atomic memory operations read (and write) */
        }
        if (bits(w, 23, 22, 2) && bits(w, 31, 30, 3)) {
            return OTHER;  /* PRFM / PRFUM */
        }
        load = !bits(w, 23, 22, 0);
    }
    if (simd) {
        return load ? SIMD_LOAD : SIMD_STORE;
    }
    return load ? SCALAR_LOAD : SCALAR_STORE;
}

static int classify_a64(uint32_t w, bool *fp16, bool *dot)
{
    *fp16 = *dot = false;
    if (bits(w, 28, 26, 4)) {  /* 100x: data processing, immediate */
        return INT_ALU;
    }
    if (bits(w, 28, 26, 5)) {  /* 101x: branches, exception generation, system */
        if (bits(w, 31, 24, 0xd4) || bits(w, 31, 22, 0x354)) {
            return OTHER;  /* SVC/BRK/..., hints (NOP), barriers, MRS/MSR */
        }
        return BRANCH;
    }
    if (bits(w, 27, 27, 1) && bits(w, 25, 25, 0)) {  /* x1x0: loads and stores */
        return a64_load_store(w);
    }
    if (bits(w, 27, 25, 5)) {  /* x101: data processing, register */
        return INT_ALU;
    }
    if (bits(w, 27, 25, 7)) {  /* x111: SIMD and floating point */
        *fp16 = a64_fp16(w);
        *dot = a64_dot(w);
        return SIMD_ARITH;
    }
    return OTHER;  /* SVE, SME, unallocated */
}

/* ---- A32/T32 (ARMv7 guests): classification from capstone's disassembly text ---- */

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static const char *conds[] = {"eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs", "vc", "hi",
                              "ls", "ge", "lt", "gt", "le", "al", NULL};

/* b, bl, bx, blx with an optional condition, then an optional .w/.n width suffix; cbz, cbnz,
 * tbb, tbh */
static bool a32_branch(const char *m)
{
    static const char *exact[] = {"b", "bl", "bx", "blx", "cbz", "cbnz", "tbb", "tbh", NULL};
    static const char *stems[] = {"blx", "bl", "bx", "b", NULL};
    char base[16];
    size_t len = strcspn(m, ".");
    if (len >= sizeof(base)) {
        return false;
    }
    memcpy(base, m, len);
    base[len] = 0;
    for (int i = 0; exact[i]; i++) {
        if (strcmp(base, exact[i]) == 0) {
            return true;
        }
    }
    for (int s = 0; stems[s]; s++) {
        size_t n = strlen(stems[s]);
        if (strncmp(base, stems[s], n) == 0 && strlen(base) == n + 2) {
            for (int c = 0; conds[c]; c++) {
                if (strcmp(base + n, conds[c]) == 0) {
                    return true;
                }
            }
        }
    }
    return false;
}

/* pop {..., pc} and ldm ..., pc return: counted as loads (they are loads first). */
static int classify_a32(const char *text, bool *fp16, bool *dot)
{
    char m[32];
    size_t len = strcspn(text, " \t");
    if (len >= sizeof(m)) {
        len = sizeof(m) - 1;
    }
    memcpy(m, text, len);
    m[len] = 0;
    *fp16 = *dot = false;
    if (a32_branch(m)) {
        return BRANCH;
    }
    if (starts(m, "pld") || starts(m, "pli") || starts(m, "vmrs") || starts(m, "vmsr") ||
        starts(m, "svc") || starts(m, "mrc") || starts(m, "mcr") || starts(m, "dmb") ||
        starts(m, "dsb") || starts(m, "isb") || starts(m, "nop") || starts(m, "it") ||
        starts(m, "yield") || starts(m, "wfe") || starts(m, "sev") || starts(m, "clrex") ||
        starts(m, "bkpt") || starts(m, "udf") || starts(m, "cps") || starts(m, "setend") ||
        starts(m, ".")) {
        return OTHER;
    }
    if (starts(m, "vld") || starts(m, "vpop")) {
        return SIMD_LOAD;
    }
    if (starts(m, "vst") || starts(m, "vpush")) {
        return SIMD_STORE;
    }
    if (starts(m, "ldr") || starts(m, "ldm") || starts(m, "pop") || starts(m, "lda")) {
        return SCALAR_LOAD;
    }
    if (starts(m, "str") || starts(m, "stm") || starts(m, "push") || starts(m, "stl")) {
        return SCALAR_STORE;
    }
    if (m[0] == 'v') {
        *fp16 = strstr(m, ".f16") != NULL && !starts(m, "vcvt");
        *dot = starts(m, "vsdot") || starts(m, "vudot");
        return SIMD_ARITH;
    }
    return INT_ALU;
}

/* ---- execution ---- */

typedef struct {
    uint32_t n[NCLASS];
    Block *block;  /* NULL unless blocks=FILE */
} TbCounts;

static void tb_exec(unsigned int vcpu, void *udata)
{
    const TbCounts *tb = udata;
    unsigned int s = slot(vcpu);
    Row *row = &rows[s];
    for (int c = 0; c < NCLASS; c++) {
        row->n[c] += tb->n[c];
    }
    if (tb->block) {
        tb->block->count[s < MAX_BLOCK_VCPUS ? s : MAX_BLOCK_VCPUS - 1]++;
    }
}

static Block *new_block(struct qemu_plugin_tb *tb, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        total += qemu_plugin_insn_size(qemu_plugin_tb_get_insn(tb, i));
    }
    Block *b = g_malloc0(sizeof(Block) + total);
    b->vaddr = qemu_plugin_tb_vaddr(tb);
    b->n_insns = n;
    b->n_bytes = total;
    size_t at = 0;
    /* T32 or A32 (the plugin API does not say): a 2-byte instruction or a halfword-aligned block is
     * T32; otherwise T32 when every instruction's first halfword carries the 32-bit T32 prefix
     * (bits 15:11 = 0b11101, 0b11110 or 0b11111; an A32 block of n words passes by chance with
     * probability about (3/32)^n, and its pricing then reads T32: a rare one-word block). */
    bool thumb = !is_a64 && (b->vaddr & 3) != 0, prefixed = !is_a64;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        size_t size = qemu_plugin_insn_size(insn);
        memcpy(b->bytes + at, qemu_plugin_insn_data(insn), size);
        if (!is_a64) {
            unsigned int top = (b->bytes[at + 1] >> 3) & 0x1f;
            thumb = thumb || size == 2;
            prefixed = prefixed && size == 4 && top >= 0x1d;
        }
        at += size;
    }
    b->thumb = thumb || prefixed;
    g_mutex_lock(&blocks_lock);
    b->next = blocks_head;
    blocks_head = b;
    g_mutex_unlock(&blocks_lock);
    return b;
}

/* Write the blocks executed since the previous marker (id >= 2), then make now the new base. */
static void block_snapshot(const char *id, bool write, unsigned int vcpus)
{
    unsigned int n = vcpus < MAX_BLOCK_VCPUS ? vcpus : MAX_BLOCK_VCPUS;
    g_mutex_lock(&blocks_lock);
    if (write) {
        fprintf(blocks_out, "blocks %s %u\n", id, n);
    }
    for (Block *b = blocks_head; b; b = b->next) {
        uint64_t delta[MAX_BLOCK_VCPUS];
        bool any = false;
        for (unsigned int v = 0; v < MAX_BLOCK_VCPUS; v++) {
            uint64_t now = __atomic_load_n(&b->count[v], __ATOMIC_RELAXED);
            delta[v] = now - b->base[v];
            b->base[v] = now;
            any = any || delta[v];
        }
        if (!write || !any) {
            continue;
        }
        if (is_a64) {
            fprintf(blocks_out, "tb %" PRIx64 " %u ", b->vaddr, b->n_insns);
        } else {
            fprintf(blocks_out, "tb32 %" PRIx64 " %c %u ", b->vaddr, b->thumb ? 't' : 'a', b->n_insns);
        }
        for (uint32_t i = 0; i < b->n_bytes; i++) {
            fprintf(blocks_out, "%02x", b->bytes[i]);
        }
        for (unsigned int v = 0; v < n; v++) {
            fprintf(blocks_out, " %" PRIu64, delta[v]);
        }
        fputc('\n', blocks_out);
    }
    if (write) {
        fprintf(blocks_out, "end %s\n", id);
        fflush(blocks_out);
    }
    g_mutex_unlock(&blocks_lock);
}

static void mem_access(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    Row *row = &rows[slot(vcpu)];
    uint64_t size = 1ull << qemu_plugin_mem_size_shift(info);
    if (qemu_plugin_mem_is_store(info)) {
        row->bytes_w += size;
    } else {
        row->bytes_r += size;
    }
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    TbCounts *counts = g_new0(TbCounts, 1);  /* lives as long as the translation may run */
    if (blocks_out) {
        counts->block = new_block(tb, n);
    }
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        char *text = (dump || !is_a64) ? qemu_plugin_insn_disas(insn) : NULL;
        bool fp16, dot;
        int cls;
        uint32_t word = 0;
        if (is_a64) {
            memcpy(&word, qemu_plugin_insn_data(insn), sizeof(word));  /* little-endian guest */
            cls = classify_a64(word, &fp16, &dot);
        } else {
            cls = classify_a32(text ? text : "", &fp16, &dot);
        }
        counts->n[cls]++;
        counts->n[TOTAL]++;
        if (fp16) {
            counts->n[SIMD_FP16]++;
        }
        if (dot) {
            counts->n[SIMD_DOT]++;
        }
        if (count_mem && (cls == SIMD_LOAD || cls == SIMD_STORE || cls == SCALAR_LOAD || cls == SCALAR_STORE)) {
            qemu_plugin_register_vcpu_mem_cb(insn, mem_access, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, NULL);
        }
        if (dump) {
            g_mutex_lock(&out_lock);
            fprintf(dump, "%s%s%s\t%08x\t%s\n", class_names[cls], fp16 ? "+fp16" : "", dot ? "+dot" : "",
                    word, text ? text : "?");
            g_mutex_unlock(&out_lock);
        }
        g_free(text);
    }
    qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_NO_REGS, counts);
}

static void snapshot(const char *id)
{
    g_mutex_lock(&out_lock);
    unsigned int n = __atomic_load_n(&vcpus_seen, __ATOMIC_RELAXED);
    fprintf(out, "mark %s %u\n", id, n);
    for (unsigned int v = 0; v < n; v++) {
        fprintf(out, "vcpu %u", v);
        for (int c = 0; c < NCLASS; c++) {
            fprintf(out, " %" PRIu64, rows[v].n[c]);
        }
        fprintf(out, " %" PRIu64 " %" PRIu64 "\n", rows[v].bytes_r, rows[v].bytes_w);
    }
    fflush(out);
    g_mutex_unlock(&out_lock);
}

static void on_syscall(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, uint64_t a1,
                       uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6,
                       uint64_t a7, uint64_t a8)
{
    if (num == marker_sysno && a1 >= marker_magic && a1 < marker_magic + MAX_MARK) {
        char id_text[16];
        snprintf(id_text, sizeof(id_text), "%" PRIu64, a1 - marker_magic);
        snapshot(id_text);
        if (blocks_out) {
            block_snapshot(id_text, a1 - marker_magic >= 2, __atomic_load_n(&vcpus_seen, __ATOMIC_RELAXED));
        }
    }
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
    snapshot("exit");
    fclose(out);
    if (blocks_out) {
        fclose(blocks_out);
    }
    if (dump) {
        fclose(dump);
    }
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    const char *out_path = NULL, *dump_path = NULL, *blocks_path = NULL;
    for (int i = 0; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "lodevem_icount: argument %s is not key=value\n", argv[i]);
            return -1;
        }
        *eq = 0;
        const char *key = argv[i], *value = eq + 1;
        if (strcmp(key, "out") == 0) {
            out_path = value;
        } else if (strcmp(key, "dump") == 0) {
            dump_path = value;
        } else if (strcmp(key, "blocks") == 0) {
            blocks_path = value;
        } else if (strcmp(key, "sysno") == 0) {
            marker_sysno = strtoll(value, NULL, 10);
        } else if (strcmp(key, "magic") == 0) {
            marker_magic = strtoull(value, NULL, 0);
        } else if (strcmp(key, "mem") == 0) {
            count_mem = strcmp(value, "on") == 0;
        } else {
            fprintf(stderr, "lodevem_icount: unknown argument %s\n", key);
            return -1;
        }
    }
    if (!out_path || info->system_emulation) {
        fprintf(stderr, "lodevem_icount: needs out=FILE and qemu-user\n");
        return -1;
    }
    out = fopen(out_path, "w");
    if (!out) {
        perror(out_path);
        return -1;
    }
    if (dump_path && !(dump = fopen(dump_path, "w"))) {
        perror(dump_path);
        return -1;
    }
    if (blocks_path && !(blocks_out = fopen(blocks_path, "w"))) {
        perror(blocks_path);
        return -1;
    }
    is_a64 = strcmp(info->target_name, "aarch64") == 0;
    fprintf(out, "lodevem_icount 1 target %s classes", info->target_name);
    for (int c = 0; c < NCLASS; c++) {
        fprintf(out, " %s", class_names[c]);
    }
    fprintf(out, " bytes_r bytes_w\n");
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
