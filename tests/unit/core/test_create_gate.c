/* SPDX-License-Identifier: Apache-2.0 */
/* The process's queue of creates (src/core/create_gate.c): never more than its limit at once (3), every
 * waiter served; with the argument "order" (limit 1, where a slot passes only from one holder to the
 * next), in order of arrival. */
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/create_gate.h"

#define THREADS 40
static int LIMIT = 3;

static int fails, checks;
#define CHECK(c, ...) do { checks++; if (!(c)) { fprintf(stderr, "FAIL: %s: ", #c); fprintf(stderr, __VA_ARGS__); \
	fputc('\n', stderr); fails++; } } while (0)

static atomic_int inside, most, served, release;
static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static int entered[THREADS], n_entered;

static void nap_us(long us)
{
	struct timespec ts = { 0, us * 1000 };
	nanosleep(&ts, NULL);
}

static void *worker(void *arg)
{
	int id = (int)(long)arg;
	if (create_gate_enter() < 0)
		abort();
	pthread_mutex_lock(&order_mu);
	entered[n_entered++] = id;
	pthread_mutex_unlock(&order_mu);
	int now = atomic_fetch_add(&inside, 1) + 1;
	for (int m = atomic_load(&most); now > m && !atomic_compare_exchange_weak(&most, &m, now);)
		;
	while (!atomic_load(&release))
		nap_us(100);
	nap_us(500);
	atomic_fetch_sub(&inside, 1);
	atomic_fetch_add(&served, 1);
	create_gate_leave();
	return NULL;
}

/* Waits (up to 10 s) until cond holds. */
#define AWAIT(cond) for (int i_ = 0; !(cond) && i_ < 100000; i_++) nap_us(100)

int main(int argc, char **argv)
{
	bool order = argc > 1 && !strcmp(argv[1], "order");
	LIMIT = order ? 1 : 3;
	setenv("SPACE_CREATE_CONCURRENCY", order ? "1" : "3", 1);
	pthread_t t[THREADS];
	/* One at a time: each thread is inside, or queued, before the next starts, so arrival order is known. */
	for (long i = 0; i < THREADS; i++) {
		pthread_create(&t[i], NULL, worker, (void *)i);
		if (i < LIMIT)
			AWAIT(atomic_load(&inside) == i + 1);
		else
			AWAIT(create_gate_waiting() == (unsigned)(i - LIMIT + 1));
	}
	CHECK(atomic_load(&inside) == LIMIT && create_gate_waiting() == (unsigned)(THREADS - LIMIT), "%d inside, %u waiting",
	      atomic_load(&inside), create_gate_waiting());
	atomic_store(&release, 1);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK(atomic_load(&served) == THREADS, "served %d of %d", atomic_load(&served), THREADS);
	CHECK(atomic_load(&most) == LIMIT, "at most %d at once, limit %d", atomic_load(&most), LIMIT);
	CHECK(create_gate_waiting() == 0, "%u still waiting", create_gate_waiting());
	int out_of_order = 0;
	for (int i = 0; i < THREADS; i++)
		out_of_order += entered[i] != i;
	if (order)
		CHECK(out_of_order == 0, "%d of %d entered out of arrival order", out_of_order, THREADS);
	printf("create gate: %d threads, limit %d, at most %d at once; %d checks, %d failed\n", THREADS, LIMIT,
	       atomic_load(&most), checks, fails);
	return fails ? 1 : 0;
}
