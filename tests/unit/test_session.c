// SPDX-License-Identifier: MIT
/* The session's round: the first source that polls is the one that waits, whatever comes
 * before it without a poll (gpuscope run adds the host's facts first: when the kernel
 * source after them was given no time to wait, its loop spun a whole CPU); the rest are
 * given none; what they deliver is added up. */
#include "unit.h"
#include "core/session.h"

struct src {
	int calls;
	int timeout; /* the last one given */
	int deliver;
};

static int poll_fn(void *obj, int timeout_ms)
{
	struct src *x = obj;

	x->calls++;
	x->timeout = timeout_ms;
	return x->deliver;
}

static void start_fn(void *obj)
{
	(void)obj;
}

static const struct source_ops no_poll = { .name = "facts", .start = start_fn };
static const struct source_ops polls = { .name = "records", .poll = poll_fn };

static void first_that_polls_waits(void **state)
{
	struct src facts = { 0 }, a = { .deliver = 3 }, b = { .deliver = -1 }, c = { .deliver = 2 };
	struct session s;

	(void)state;
	session__init(&s);
	session__add_source(&s, &no_poll, &facts);
	session__add_source(&s, &polls, &a);
	session__add_source(&s, &polls, &b);
	session__add_source(&s, &polls, &c);
	assert_int_equal(session__poll(&s, 10), 5); /* (a failure counts as nothing) */
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.timeout, 10);
	assert_int_equal(b.calls, 1);
	assert_int_equal(b.timeout, 0);
	assert_int_equal(c.timeout, 0);
	assert_int_equal(facts.calls, 0);
	session__close(&s);
}

static void no_source_polls(void **state)
{
	struct src facts = { 0 };
	struct session s;

	(void)state;
	session__init(&s);
	session__add_source(&s, &no_poll, &facts);
	assert_int_equal(session__poll(&s, 10), 0);
	session__close(&s);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(first_that_polls_waits),
	cmocka_unit_test(no_source_polls),
};

UNIT_MAIN(tests)
