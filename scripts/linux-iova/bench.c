/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * bench.c: Linux 6.12's IOVA allocator (drivers/iommu/iova.c, built in user space over
 * kshim.h) driven through the shapes of crates/iommulab/benches/iova.rs, with the RNG,
 * checksum and output of crates/iommulab/examples/iova_shapes/, so that
 * scripts/bench_vs_linux_iova.sh can compare both the speed and the pfns picked.
 *
 *   bench SHAPE LIVE OPS [dump]
 *
 * SHAPE:
 *   tree_fifo   alloc_iova(1 page, size_aligned) / free_iova(pfn) pairs, FIFO over LIVE ranges
 *   fast_fifo   alloc_iova_fast / free_iova_fast pairs (the per-CPU rcache), FIFO
 *   tree_churn  free a random live range (splitmix64), alloc_iova one, LIVE ranges live
 *   tree_mixed  tree_churn with sizes of 1..=48 pages (splitmix64): size alignment, and
 *               sizes above the rcache's 32 pages
 *   fast_mixed  the same through alloc_iova_fast / free_iova_fast (freed with the size asked
 *               for, as dma-iommu does): rcache bins, magazine swaps and the depot
 *   tree_dma    tree_mixed the way dma-iommu allocates for a PCI device with a 36-bit mask
 *               (iommu_dma_alloc_iova): below 4 GiB first (limit_pfn 2^20 - 1), else up to
 *               64 GiB (limit_pfn 2^24 - 1): both cached nodes, max32_alloc_size
 *   fast_dma    the same through alloc_iova_fast (flush_rcache false, then true)
 * A mixed run draws each range's size after the index of the range it replaces; the fill
 * draws sizes too. A failed allocation (the space is full: the search's retry,
 * max32_alloc_size and, for alloc_iova_fast, the rcache flush have run) counts as pfn 0 and
 * leaves its slot empty until it is drawn again; the 1-page shapes stop on one.
 * Each run fills LIVE ranges, runs OPS/8 untimed warm-up steps, then OPS timed steps
 * (CLOCK_MONOTONIC around the loop). Every pfn handed out (fill, warm-up, timed) goes into
 * a 64-bit FNV-1a over 64-bit words, in order. `dump` prints every pfn, one a line.
 *
 * The space is iommulab's [1, 2^20) with the exclusive limit 2^20 (`Pfn::new(END)`):
 * init_iova_domain(granule 4096, start_pfn 1) and Linux's inclusive limit_pfn = 2^20 - 1
 * (alloc_iova passes limit_pfn + 1 to the search, which is iommulab's exclusive limit).
 * The dma shapes' second attempt reaches 2^24 (iommulab's space [1, 2^24)).
 */
#include <linux/iova.h>

#include <inttypes.h>
#include <string.h>
#include <time.h>

#define END_PFN (1UL << 20)
#define LIMIT_PFN (END_PFN - 1)
#define SEED 0x696f6d6d756c6162ULL /* "iommulab" */
#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

struct run {
	u64 hash;
	u64 count;
	unsigned long first[4];
	int dump;
};

static inline void note(struct run *r, unsigned long pfn)
{
	if (r->count < 4)
		r->first[r->count] = pfn;
	r->count++;
	r->hash = (r->hash ^ (u64)pfn) * FNV_PRIME;
	if (r->dump)
		printf("%lu\n", pfn);
}

static inline u64 splitmix64(u64 *s)
{
	u64 z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void die(const char *what, unsigned long step)
{
	fprintf(stderr, "bench: %s failed at step %lu (space exhausted?)\n", what, step);
	exit(2);
}

static struct iova *tree_alloc(struct iova_domain *d, struct run *r, unsigned long step)
{
	struct iova *v = alloc_iova(d, 1, LIMIT_PFN, true);
	if (!v)
		die("alloc_iova", step);
	note(r, v->pfn_lo);
	return v;
}

static unsigned long fast_alloc(struct iova_domain *d, struct run *r, unsigned long step)
{
	unsigned long pfn = alloc_iova_fast(d, 1, LIMIT_PFN, true);
	if (!pfn)
		die("alloc_iova_fast", step);
	note(r, pfn);
	return pfn;
}

/*
 * The tree shapes free by pfn with free_iova, which looks the range up (private_find_iova),
 * as iommulab's `free(pfn, pages)` does and as free_iova_fast does when the rcache does not
 * take a range; __free_iova (given the node) would skip that descent.
 */
static inline void tree_free(struct iova_domain *d, struct iova *v)
{
	free_iova(d, v->pfn_lo);
}

/* FIFO pairs: free the oldest, allocate a new one in its slot. */
static void tree_fifo(struct iova_domain *d, struct run *r, struct iova **ring,
		      unsigned long live, unsigned long n, unsigned long *next)
{
	for (unsigned long i = 0; i < n; i++) {
		tree_free(d, ring[*next]);
		ring[*next] = tree_alloc(d, r, i);
		if (++*next == live)
			*next = 0;
	}
}

static void fast_fifo(struct iova_domain *d, struct run *r, unsigned long *ring,
		      unsigned long live, unsigned long n, unsigned long *next)
{
	for (unsigned long i = 0; i < n; i++) {
		free_iova_fast(d, ring[*next], 1);
		ring[*next] = fast_alloc(d, r, i);
		if (++*next == live)
			*next = 0;
	}
}

/* Churn: free a random live range, allocate one in its slot. */
static void tree_churn(struct iova_domain *d, struct run *r, struct iova **ring,
		       unsigned long live, unsigned long n, u64 *rng)
{
	for (unsigned long i = 0; i < n; i++) {
		unsigned long k = (unsigned long)(splitmix64(rng) % live);
		tree_free(d, ring[k]);
		ring[k] = tree_alloc(d, r, i);
	}
}

#define MIXED_MAX_PAGES 48
#define DMA_LIMIT_PFN ((1UL << 24) - 1)

static inline unsigned long draw_size(u64 *rng)
{
	return 1 + (unsigned long)(splitmix64(rng) % MIXED_MAX_PAGES);
}

/* iommu_dma_alloc_iova's two attempts; 0 if both fail. */
static unsigned long dma_alloc(struct iova_domain *d, unsigned long size, int fast)
{
	if (fast) {
		unsigned long pfn = alloc_iova_fast(d, size, LIMIT_PFN, false);
		return pfn ? pfn : alloc_iova_fast(d, size, DMA_LIMIT_PFN, true);
	}
	struct iova *v = alloc_iova(d, size, LIMIT_PFN, true);
	if (!v)
		v = alloc_iova(d, size, DMA_LIMIT_PFN, true);
	return v ? v->pfn_lo : 0;
}

static void dma_mixed(struct iova_domain *d, struct run *r, unsigned long *ring,
		      unsigned long *sizes, unsigned long live, unsigned long n, u64 *rng, int fast)
{
	for (unsigned long i = 0; i < n; i++) {
		unsigned long k = (unsigned long)(splitmix64(rng) % live);
		if (ring[k]) {
			if (fast)
				free_iova_fast(d, ring[k], sizes[k]);
			else
				free_iova(d, ring[k]);
		}
		sizes[k] = draw_size(rng);
		ring[k] = dma_alloc(d, sizes[k], fast);
		note(r, ring[k]);
	}
}
static void tree_mixed(struct iova_domain *d, struct run *r, struct iova **ring,
		       unsigned long live, unsigned long n, u64 *rng)
{
	for (unsigned long i = 0; i < n; i++) {
		unsigned long k = (unsigned long)(splitmix64(rng) % live);
		if (ring[k])
			tree_free(d, ring[k]);
		ring[k] = alloc_iova(d, draw_size(rng), LIMIT_PFN, true);
		note(r, ring[k] ? ring[k]->pfn_lo : 0);
	}
}

static void fast_mixed(struct iova_domain *d, struct run *r, unsigned long *ring,
		       unsigned long *sizes, unsigned long live, unsigned long n, u64 *rng)
{
	for (unsigned long i = 0; i < n; i++) {
		unsigned long k = (unsigned long)(splitmix64(rng) % live);
		if (ring[k])
			free_iova_fast(d, ring[k], sizes[k]);
		sizes[k] = draw_size(rng);
		ring[k] = alloc_iova_fast(d, sizes[k], LIMIT_PFN, true);
		note(r, ring[k]);
	}
}

static unsigned long parse(const char *s, const char *name)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v == 0) {
		fprintf(stderr, "bench: %s = \"%s\": expected a positive integer\n", name, s);
		exit(1);
	}
	return v;
}

int main(int argc, char **argv)
{
	if (argc < 4 || argc > 5 || (argc == 5 && strcmp(argv[4], "dump") != 0)) {
		fprintf(stderr, "usage: %s tree_fifo|fast_fifo|tree_churn|tree_mixed|fast_mixed|tree_dma|fast_dma LIVE OPS [dump]\n", argv[0]);
		return 1;
	}
	const char *shape = argv[1];
	int tmixed = strcmp(shape, "tree_mixed") == 0;
	int fmixed = strcmp(shape, "fast_mixed") == 0;
	int tdma = strcmp(shape, "tree_dma") == 0;
	int fdma = strcmp(shape, "fast_dma") == 0;
	int fast = strcmp(shape, "fast_fifo") == 0 || fmixed || fdma;
	int churn = strcmp(shape, "tree_churn") == 0;
	if (!fast && !churn && !tmixed && !tdma && strcmp(shape, "tree_fifo") != 0) {
		fprintf(stderr, "bench: unknown shape \"%s\" (expected tree_fifo, fast_fifo, tree_churn, tree_mixed, fast_mixed, tree_dma or fast_dma)\n", shape);
		return 1;
	}
	unsigned long live = parse(argv[2], "LIVE"), ops = parse(argv[3], "OPS");
	if (live >= END_PFN / 2) {
		fprintf(stderr, "bench: LIVE = %lu does not fit the space [1, 2^20) with room to move\n", live);
		return 1;
	}
	unsigned long warm = ops / 8;
	struct run r = { .hash = FNV_OFFSET, .dump = argc == 5 };
	struct iova_domain d;
	if (iova_cache_get()) {
		fprintf(stderr, "bench: iova_cache_get failed\n");
		return 2;
	}
	init_iova_domain(&d, 4096, 1);
	if (fast && iova_domain_init_rcaches(&d)) {
		fprintf(stderr, "bench: iova_domain_init_rcaches failed\n");
		return 2;
	}
	struct iova **tring = calloc(live, sizeof(*tring));
	unsigned long *fring = calloc(live, sizeof(*fring));
	unsigned long *sizes = calloc(live, sizeof(*sizes));
	if (!tring || !fring || !sizes) {
		fprintf(stderr, "bench: out of memory for %lu ranges\n", live);
		return 2;
	}
	u64 rng = SEED;
	for (unsigned long i = 0; i < live; i++) {
		if (tdma || fdma) {
			sizes[i] = draw_size(&rng);
			fring[i] = dma_alloc(&d, sizes[i], fdma);
			note(&r, fring[i]);
		} else if (fmixed) {
			sizes[i] = draw_size(&rng);
			fring[i] = alloc_iova_fast(&d, sizes[i], LIMIT_PFN, true);
			note(&r, fring[i]);
		} else if (tmixed) {
			tring[i] = alloc_iova(&d, draw_size(&rng), LIMIT_PFN, true);
			note(&r, tring[i] ? tring[i]->pfn_lo : 0);
		} else if (fast) {
			fring[i] = fast_alloc(&d, &r, i);
		} else {
			tring[i] = tree_alloc(&d, &r, i);
		}
	}
	unsigned long next = 0;
	double t0 = 0, t1 = 0;
	if (tdma || fdma) {
		dma_mixed(&d, &r, fring, sizes, live, warm, &rng, fdma);
		t0 = now_ns();
		dma_mixed(&d, &r, fring, sizes, live, ops, &rng, fdma);
		t1 = now_ns();
	} else if (fmixed) {
		fast_mixed(&d, &r, fring, sizes, live, warm, &rng);
		t0 = now_ns();
		fast_mixed(&d, &r, fring, sizes, live, ops, &rng);
		t1 = now_ns();
	} else if (tmixed) {
		tree_mixed(&d, &r, tring, live, warm, &rng);
		t0 = now_ns();
		tree_mixed(&d, &r, tring, live, ops, &rng);
		t1 = now_ns();
	} else if (fast) {
		fast_fifo(&d, &r, fring, live, warm, &next);
		t0 = now_ns();
		fast_fifo(&d, &r, fring, live, ops, &next);
		t1 = now_ns();
	} else if (churn) {
		tree_churn(&d, &r, tring, live, warm, &rng);
		t0 = now_ns();
		tree_churn(&d, &r, tring, live, ops, &rng);
		t1 = now_ns();
	} else {
		tree_fifo(&d, &r, tring, live, warm, &next);
		t0 = now_ns();
		tree_fifo(&d, &r, tring, live, ops, &next);
		t1 = now_ns();
	}
	if (!r.dump)
		printf("shape=%s live=%lu ops=%lu impl=linux-%s ns=%.2f count=%" PRIu64
		       " checksum=%016" PRIx64 " first=%lu,%lu,%lu,%lu\n",
		       shape, live, ops, SHIM_LOCKS ? "locks" : "nolocks", (t1 - t0) / (double)ops,
		       r.count, r.hash, r.first[0], r.first[1], r.first[2], r.first[3]);
	put_iova_domain(&d);
	iova_cache_put();
	free(tring);
	free(fring);
	free(sizes);
	return 0;
}
