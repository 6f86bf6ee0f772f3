// bench/nvme_io.c: a disk's sequential bandwidth through zero/nvme_store.h's engine (the store
// ZeRO-Infinity's NVMe offload uses), for bench/nvme_offload.sh:
//   build/nvme_io DIR MIB [BLOCK_SIZE QUEUE_DEPTH THREAD_COUNT]
// Creates a file of MIB MiB under DIR (O_DIRECT where the filesystem allows it), writes it
// once to allocate its blocks, then times a sequential overwrite and a sequential read of the
// whole file (one job each: the engine keeps its queues full), removes it, and prints
//   nvme_io: write W MB/s, read R MB/s (MIB MiB, ENGINE)
#include "zero/nvme_store.h"

int main(int argc, char **argv) {
    if (argc != 3 && argc != 6) { fprintf(stderr, "usage: %s DIR MIB [BLOCK_SIZE QUEUE_DEPTH THREAD_COUNT]\n", argv[0]); return 2; }
    size_t mib = (size_t)atol(argv[2]), chunk = (size_t)64 << 20;
    AioSettings aio = {1 << 20, 8, 1, 0, 1};   // DeepSpeed's defaults
    if (argc == 6) { aio.block_size = atoll(argv[3]); aio.queue_depth = atoi(argv[4]); aio.thread_count = atoi(argv[5]); }
    if (mib < 64 || aio.block_size < NVME_ALIGN || aio.block_size % NVME_ALIGN || aio.queue_depth < 1 || aio.thread_count < 1)
        fatal("nvme_io: MIB >= 64, BLOCK_SIZE a multiple of %d, QUEUE_DEPTH and THREAD_COUNT >= 1", NVME_ALIGN);
    size_t bytes = round_up(mib << 20, chunk);
    NvmeStore s;
    nvme_store_init(&s, &aio);
    char name[64], err[1400];
    snprintf(name, sizeof(name), "nvme_io-pid%d.bin", (int)getpid());
    int plane = nvme_plane_add(&s, nvme_file_add(&s, argv[1], name), 1, bytes);
    char *bounce = (char *)nvme_aligned_alloc(NVME_BOUNCE_BYTES, "staging"), *buf = (char *)nvme_aligned_alloc(chunk, "buffer");
    for (size_t i = 0; i < chunk; i++) buf[i] = (char)(i * 131 + 7);   // not zeros: no device may shortcut them
    if (!nvme_store_open(&s, 1, bounce, err, sizeof(err))) fatal("nvme_io: %s", err);
    const NvmePlane *p = &s.plane[plane];
    double mbps[3];
    for (int pass = 0; pass < 3; pass++) {   // allocate, overwrite, read
        int write = pass < 2;
        NvmeJob j;
        double t0 = wall_time();
        nvme_job_begin(&s, &j);
        for (size_t at = 0; at < bytes; at += chunk) nvme_job_add(&s, &j, p->file, write, buf, chunk, p->base + (off_t)at);
        nvme_job_end(&s, &j);
        nvme_wait(&s, &j);
        mbps[pass] = bytes / (wall_time() - t0) / 1e6;
    }
    printf("nvme_io: write %.0f MB/s, read %.0f MB/s (%zu MiB; first write, allocating: %.0f MB/s; %s)\n", mbps[1], mbps[2],
           bytes >> 20, mbps[0], s.engine);
    nvme_store_close(&s);
    free(bounce); free(buf);
    return 0;
}
