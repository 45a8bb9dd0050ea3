/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A Dockerfile, parsed as Docker's builder reads it: one instruction per line, a trailing backslash
 * continuing it, comment lines (a '#' first) dropped even inside a continuation, keywords in any case, the
 * exec form (a JSON array of strings) or the shell form, ENV/LABEL/ARG pairs with quotes and backslash
 * escapes, COPY/ADD flags. The instructions taken: FROM, RUN, COPY, ADD, ENV, WORKDIR, USER, ARG, LABEL,
 * ENTRYPOINT, CMD; any other is refused with its line number, and so is what cannot be parsed. The text is
 * the caller's (over an API, a hostile upload): everything is bounded. Private; fuzzed.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define DF_TEXT_MAX (1u << 20)        /* a Dockerfile */
#define DF_INSTRS_MAX 4096u
#define DF_INSTR_MAX (256u << 10)     /* one instruction, continuations joined */
#define DF_ARGS_MAX 4096u
#define DF_EXPAND_MAX (256u << 10)    /* one word after variable substitution */

enum df_op { DF_FROM, DF_RUN, DF_COPY, DF_ADD, DF_ENV, DF_WORKDIR, DF_USER, DF_ARG, DF_LABEL, DF_ENTRYPOINT, DF_CMD };

struct df_instr {
	enum df_op op;
	unsigned line;            /* of its keyword, from 1 */
	char *text;               /* what follows the keyword, continuations joined (the cache key's part) */
	bool json;                /* RUN, CMD, ENTRYPOINT, COPY, ADD in the exec form */
	char **args;              /* NULL-terminated: the exec form's array; the shell form's whole text (RUN, CMD,
	                             ENTRYPOINT); the raw words, quotes kept for dockerfile_expand (COPY, ADD:
	                             sources then destination; FROM: the base; WORKDIR, USER: one); KEY, VALUE
	                             pairs, raw (ENV, LABEL, ARG) */
	size_t n_args;
	bool *has_value;          /* ENV, LABEL, ARG: per pair (index i/2), whether it had "=VALUE" (ARG NAME has
	                             none: its value is the build argument's, if any) */
	char *from;               /* COPY --from=STAGE, NULL */
	char *chown;              /* COPY/ADD --chown=USER[:GROUP], NULL */
	char *as;                 /* FROM BASE AS NAME, NULL */
};

struct dockerfile {
	struct df_instr *v;
	size_t n;
};

/* Parses text (len bytes). 0, or -EINVAL with "line N: why" in err. */
int dockerfile_parse(const char *text, size_t len, struct dockerfile *ret, char *err, size_t errlen);
void dockerfile_free(struct dockerfile *df);

/* The keyword of an instruction ("RUN"). */
const char *dockerfile_keyword(enum df_op k);

/*
 * Substitutes $NAME, ${NAME}, ${NAME:-word} and ${NAME:+word} in word from vars ("KEY=VALUE", NULL-
 * terminated; a later KEY wins); "\$" is a literal '$'. An unset NAME is "". *ret malloc'd. -EINVAL (a
 * bad ${...}) or -E2BIG (past DF_EXPAND_MAX) with a message.
 */
int dockerfile_expand(const char *word, const char *const *vars, char **ret, char *err, size_t errlen);
