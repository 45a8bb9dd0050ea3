/* SPDX-License-Identifier: Apache-2.0 */
/* The process's queue of creates (create_gate.h). */
#include "core/create_gate.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>

#include "util/util.h"

/* One per waiting thread, on its stack: a leaver wakes exactly the first waiter, not all of them. */
struct waiter {
	pthread_cond_t cv;
	struct waiter *next;
	bool go;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned in, waiting, limit; /* limit 0: not read yet; UINT_MAX: none */
static struct waiter *head, **tail = &head;

/* 0 when the setting does not parse. */
static unsigned read_limit(void)
{
	const char *e = getenv("SPACE_CREATE_CONCURRENCY");
	uint64_t v;
	if (e)
		return util_parse_uint(e, 0, 100000, &v) < 0 ? 0 : v ? (unsigned)v : ~0U;
	cpu_set_t set;
	int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
	return cpus > 0 ? 2u * (unsigned)cpus : 2u;
}

int create_gate_enter(void)
{
	pthread_mutex_lock(&mu);
	if (!limit && !(limit = read_limit())) {
		pthread_mutex_unlock(&mu);
		return -EINVAL;
	}
	if (in < limit && !head) {
		in++;
		pthread_mutex_unlock(&mu);
		return 0;
	}
	struct waiter w = { .next = NULL, .go = false };
	pthread_cond_init(&w.cv, NULL);
	*tail = &w;
	tail = &w.next;
	waiting++;
	while (!w.go)
		pthread_cond_wait(&w.cv, &mu);
	pthread_mutex_unlock(&mu);
	pthread_cond_destroy(&w.cv);
	return 0;
}

void create_gate_leave(void)
{
	pthread_mutex_lock(&mu);
	struct waiter *w = head;
	if (w) {
		/* The slot passes to the first waiter: "in" stays as it is. */
		head = w->next;
		if (!head)
			tail = &head;
		w->go = true;
		waiting--;
		pthread_cond_signal(&w->cv);
	} else {
		in--;
	}
	pthread_mutex_unlock(&mu);
}

unsigned create_gate_waiting(void)
{
	pthread_mutex_lock(&mu);
	unsigned n = waiting;
	pthread_mutex_unlock(&mu);
	return n;
}
