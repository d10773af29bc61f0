/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * kshim.h: the few kernel facilities that Linux 6.12's drivers/iommu/iova.c and
 * lib/rbtree.c use, mapped onto user space so the two files compile unchanged with gcc.
 * iommulab's own code (no kernel source in the repository): scripts/bench_vs_linux_iova.sh
 * extracts the kernel files from Debian's linux-source-6.12 at run time and makes every
 * <linux/NAME.h> the kernel files include, other than rbtree*.h and iova.h, a one-line
 * header that includes this file.
 *
 * Mapping:
 * - spinlocks: SHIM_LOCKS=1 is a real test-and-set lock (one lock cmpxchg to take it, one
 *   release store to drop it, as an uncontended qspinlock); SHIM_LOCKS=0 is nothing. The
 *   _irqsave variants do not touch interrupts (user space cannot);
 * - kmem_cache / kzalloc / kcalloc / kfree: malloc, calloc and free (glibc's tcache is the
 *   slab's per-CPU freelist stand-in);
 * - per-CPU data: one CPU, so a per-CPU pointer is the allocation itself;
 * - delayed work (the rcache depot trim): never runs, as in iommulab's allocators when
 *   no `on_tick` is given; cpuhp, modules and exports: nothing.
 */
#ifndef IOMMULAB_KSHIM_H
#define IOMMULAB_KSHIM_H

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef SHIM_LOCKS
#error "build with -DSHIM_LOCKS=1 (real spinlocks) or -DSHIM_LOCKS=0 (no-op locks)"
#endif

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef uint64_t dma_addr_t;
typedef unsigned int gfp_t;

/* ---- compiler ---- */
#undef __always_inline
#define __always_inline inline __attribute__((__always_inline__))
#define noinline __attribute__((__noinline__))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))
#define rcu_assign_pointer(p, v) WRITE_ONCE((p), (v))
#define rcu_dereference_raw(p) READ_ONCE(p)
#define RCU_INIT_POINTER(p, v) ((p) = (v))
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#define IS_REACHABLE(option) 1
#define __percpu

/* A file-scope declaration, so `EXPORT_SYMBOL(x);` and `MODULE_LICENSE("GPL");` stay valid C. */
#define SHIM_FILE_SCOPE_NOTHING extern int iommulab_kshim_nothing
#define EXPORT_SYMBOL(sym) SHIM_FILE_SCOPE_NOTHING
#define EXPORT_SYMBOL_GPL(sym) SHIM_FILE_SCOPE_NOTHING
#define MODULE_AUTHOR(s) SHIM_FILE_SCOPE_NOTHING
#define MODULE_DESCRIPTION(s) SHIM_FILE_SCOPE_NOTHING
#define MODULE_LICENSE(s) SHIM_FILE_SCOPE_NOTHING

/* ---- arithmetic (include/linux/{minmax,bitops,log2,align}.h semantics) ---- */
#define min(a, b) ({ __typeof__(a) _a = (a); __typeof__(b) _b = (b); _a < _b ? _a : _b; })
#define swap(a, b) do { __typeof__(a) _t = (a); (a) = (b); (b) = _t; } while (0)
#define ALIGN(x, a) (((x) + ((__typeof__(x))(a) - 1)) & ~((__typeof__(x))(a) - 1))
#define ALIGN_DOWN(x, a) ((x) & ~((__typeof__(x))(a) - 1))
#define PAGE_SIZE 4096UL
static inline unsigned long __ffs(unsigned long x) { return (unsigned long)__builtin_ctzl(x); }
static inline unsigned int fls_long(unsigned long x) { return x ? 64u - (unsigned int)__builtin_clzl(x) : 0u; }
static inline bool is_power_of_2(unsigned long n) { return n != 0 && (n & (n - 1)) == 0; }
static inline unsigned long roundup_pow_of_two(unsigned long n) { return 1UL << fls_long(n - 1); }
static inline int ilog2(unsigned long n) { return 63 - __builtin_clzl(n); }
#define order_base_2(n) ((n) > 1 ? ilog2((n) - 1) + 1 : 0)

/* ---- diagnostics ---- */
#define BUG_ON(c) do { if (c) { fprintf(stderr, "kshim: BUG_ON(%s) at %s:%d\n", #c, __FILE__, __LINE__); abort(); } } while (0)
#define WARN_ON(c) ({ int _w = !!(c); if (_w) fprintf(stderr, "kshim: WARN_ON(%s) at %s:%d\n", #c, __FILE__, __LINE__); _w; })
#define pr_err(...) fputs("kshim: pr_err from iova.c\n", stderr)
#define ERR_PTR(e) ((void *)(long)(e))
#define ENOTSUPP 524
#define kmemleak_transient_leak(p) ((void)(p))

/* ---- locks ---- */
typedef struct { int v; } spinlock_t;
#if SHIM_LOCKS
static inline void spin_lock(spinlock_t *l)
{
	int unlocked = 0;
	while (!__atomic_compare_exchange_n(&l->v, &unlocked, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		unlocked = 0;
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause(); /* cpu_relax() */
#endif
	}
}
static inline void spin_unlock(spinlock_t *l) { __atomic_store_n(&l->v, 0, __ATOMIC_RELEASE); }
#else
static inline void spin_lock(spinlock_t *l) { (void)l; }
static inline void spin_unlock(spinlock_t *l) { (void)l; }
#endif
#define spin_lock_init(l) ((l)->v = 0)
#define spin_lock_irqsave(l, flags) do { (flags) = 0; spin_lock(l); } while (0)
#define spin_unlock_irqrestore(l, flags) do { (void)(flags); spin_unlock(l); } while (0)
#define assert_spin_locked(l) ((void)(l))
struct mutex { int unused; };
#define DEFINE_MUTEX(name) struct mutex name
#define mutex_lock(m) ((void)(m))
#define mutex_unlock(m) ((void)(m))

/* ---- memory ---- */
#define GFP_KERNEL 0u
#define GFP_ATOMIC 0u
#define __GFP_NOWARN 0u
#define SLAB_HWCACHE_ALIGN 0u
struct kmem_cache { size_t size; };
static inline struct kmem_cache *kmem_cache_create(const char *name, unsigned int size,
		unsigned int align, unsigned int flags, void (*ctor)(void *))
{
	struct kmem_cache *c = malloc(sizeof(*c));
	(void)name; (void)align; (void)flags; (void)ctor;
	if (c)
		c->size = size;
	return c;
}
static inline void kmem_cache_destroy(struct kmem_cache *c) { free(c); }
static inline void *kmem_cache_alloc(struct kmem_cache *c, gfp_t f) { (void)f; return malloc(c->size); }
static inline void *kmem_cache_zalloc(struct kmem_cache *c, gfp_t f) { (void)f; return calloc(1, c->size); }
static inline void kmem_cache_free(struct kmem_cache *c, void *p) { (void)c; free(p); }
static inline void *kcalloc(size_t n, size_t size, gfp_t f) { (void)f; return calloc(n, size); }
static inline void kfree(const void *p) { free((void *)p); }

/* ---- one CPU ---- */
#define NR_CPUS_SHIM 1u
#define for_each_possible_cpu(cpu) for ((cpu) = 0; (cpu) < NR_CPUS_SHIM; (cpu)++)
#define for_each_online_cpu(cpu) for_each_possible_cpu(cpu)
#define num_online_cpus() NR_CPUS_SHIM
#define cache_line_size() 64
#define __alloc_percpu(size, align) calloc(1, (size))
#define free_percpu(p) free(p)
#define per_cpu_ptr(p, cpu) ((void)(cpu), (p))
#define raw_cpu_ptr(p) (p)

/* ---- delayed work (never runs) and CPU hotplug (never happens) ---- */
struct work_struct { int unused; };
struct delayed_work { struct work_struct work; };
#define INIT_DELAYED_WORK(w, fn) do { (void)(w); (void)(fn); } while (0)
static inline bool schedule_delayed_work(struct delayed_work *w, unsigned long delay) { (void)w; (void)delay; return true; }
static inline bool cancel_delayed_work_sync(struct delayed_work *w) { (void)w; return false; }
#define msecs_to_jiffies(ms) (ms)
struct hlist_node { struct hlist_node *next, **pprev; };
#define hlist_entry_safe(ptr, type, member) ((ptr) ? container_of(ptr, type, member) : NULL)
enum { CPUHP_IOMMU_IOVA_DEAD };
#define cpuhp_state_add_instance_nocalls(state, node) ((void)(node), 0)
#define cpuhp_state_remove_instance_nocalls(state, node) ((void)(node))
#define cpuhp_setup_state_multi(state, name, up, down) ((void)(up), (void)(down), 0)
#define cpuhp_remove_multi_state(state) ((void)0)

#endif
