/* SPDX-License-Identifier: Apache-2.0 */
/* Dockerfiles (image/dockerfile.h). */
#include "image/dockerfile.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPAND_DEPTH 4

static const char *const keywords[] = {
	[DF_FROM] = "FROM", [DF_RUN] = "RUN", [DF_COPY] = "COPY", [DF_ADD] = "ADD", [DF_ENV] = "ENV",
	[DF_WORKDIR] = "WORKDIR", [DF_USER] = "USER", [DF_ARG] = "ARG", [DF_LABEL] = "LABEL",
	[DF_ENTRYPOINT] = "ENTRYPOINT", [DF_CMD] = "CMD",
};

const char *dockerfile_keyword(enum df_op k)
{
	return (size_t)k < sizeof(keywords) / sizeof(keywords[0]) ? keywords[k] : "?";
}

static int errf(char *err, size_t errlen, int r, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int errf(char *err, size_t errlen, int r, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return r;
}

static void strv_free(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

static void instr_clear(struct df_instr *in)
{
	free(in->text);
	strv_free(in->args);
	free(in->from);
	free(in->chown);
	free(in->as);
	free(in->has_value);
	memset(in, 0, sizeof(*in));
}

void dockerfile_free(struct dockerfile *df)
{
	for (size_t i = 0; i < df->n; i++)
		instr_clear(&df->v[i]);
	free(df->v);
	memset(df, 0, sizeof(*df));
}

static int push(struct df_instr *in, char *s)
{
	if (!s)
		return -ENOMEM;
	if (in->n_args == DF_ARGS_MAX) {
		free(s);
		return -E2BIG;
	}
	char **v = realloc(in->args, (in->n_args + 2) * sizeof(char *));
	if (!v) {
		free(s);
		return -ENOMEM;
	}
	v[in->n_args++] = s;
	v[in->n_args] = NULL;
	in->args = v;
	return 0;
}

/*
 * The next word of s from *pos, raw (quotes and escapes kept, for dockerfile_expand later), ending at
 * unquoted white space; *ret_eq: the offset of its first unquoted '=' (-1: none). 0 at the end; 1 with a
 * word; -EINVAL for an unterminated quote.
 */
static int next_word(const char *s, size_t *pos, char **ret, ssize_t *ret_eq)
{
	size_t i = *pos;
	while (s[i] == ' ' || s[i] == '\t')
		i++;
	if (!s[i]) {
		*pos = i;
		return 0;
	}
	size_t start = i;
	ssize_t eq = -1;
	char q = 0;
	for (; s[i]; i++) {
		char c = s[i];
		if (q) {
			if (c == '\\' && q == '"' && s[i + 1])
				i++;
			else if (c == q)
				q = 0;
			continue;
		}
		if (c == ' ' || c == '\t')
			break;
		if (c == '\\' && s[i + 1])
			i++;
		else if (c == '"' || c == '\'')
			q = c;
		else if (c == '=' && eq < 0)
			eq = (ssize_t)(i - start);
	}
	if (q)
		return -EINVAL;
	*ret = strndup(s + start, i - start);
	*ret_eq = eq;
	*pos = i;
	return *ret ? 1 : -ENOMEM;
}

/* A JSON array of strings (the exec form), or 0 when text is not one (the shell form). */
static int json_form(struct df_instr *in)
{
	if (in->text[0] != '[')
		return 0;
	cJSON *j = cJSON_Parse(in->text);
	if (!cJSON_IsArray(j)) {
		cJSON_Delete(j);
		return 0; /* Docker takes it as the shell form then */
	}
	const cJSON *e;
	int r = 0;
	cJSON_ArrayForEach(e, j) {
		if (!cJSON_IsString(e)) {
			cJSON_Delete(j);
			strv_free(in->args);
			in->args = NULL;
			in->n_args = 0;
			return 0;
		}
		if ((r = push(in, strdup(e->valuestring))) < 0)
			break;
	}
	cJSON_Delete(j);
	in->json = r == 0;
	return r < 0 ? r : 1;
}

/* Flags before the arguments: --from= and --chown= (COPY), --chown= (ADD), --platform=linux/amd64 (FROM). */
static int flags(struct df_instr *in, size_t *pos, char *err, size_t errlen)
{
	for (;;) {
		size_t i = *pos;
		while (in->text[i] == ' ' || in->text[i] == '\t')
			i++;
		if (strncmp(in->text + i, "--", 2))
			return 0;
		size_t n = strcspn(in->text + i, " \t");
		char *f = strndup(in->text + i, n);
		if (!f)
			return -ENOMEM;
		*pos = i + n;
		char **dst = NULL;
		if (in->op == DF_COPY && !strncmp(f, "--from=", 7))
			dst = &in->from;
		else if ((in->op == DF_COPY || in->op == DF_ADD) && !strncmp(f, "--chown=", 8))
			dst = &in->chown;
		else if (in->op == DF_FROM && !strcmp(f, "--platform=linux/amd64")) {
			free(f);
			continue;
		}
		if (!dst || !*(strchr(f, '=') + 1)) {
			int r = errf(err, errlen, -EINVAL, "line %u: %s %.60s is not supported", in->line,
				     dockerfile_keyword(in->op), f);
			free(f);
			return r;
		}
		free(*dst);
		*dst = strdup(strchr(f, '=') + 1);
		free(f);
		if (!*dst)
			return -ENOMEM;
	}
}

/* Records whether the pair just pushed (args n-2, n-1) had a value. */
static int pair_value(struct df_instr *in, bool has)
{
	bool *v = realloc(in->has_value, (in->n_args / 2) * sizeof(bool));
	if (!v)
		return -ENOMEM;
	v[in->n_args / 2 - 1] = has;
	in->has_value = v;
	return 0;
}

static int words(struct df_instr *in, size_t pos, bool pairs, char *err, size_t errlen)
{
	for (;;) {
		char *w;
		ssize_t eq;
		int r = next_word(in->text, &pos, &w, &eq);
		if (r == 0)
			return 0;
		if (r < 0)
			return r == -EINVAL ? errf(err, errlen, r, "line %u: an unterminated quote", in->line) : r;
		if (!pairs) {
			if ((r = push(in, w)) < 0)
				return r;
			continue;
		}
		if (eq <= 0) {
			bool arg = in->op == DF_ARG && eq < 0;
			if (!arg) {
				free(w);
				return errf(err, errlen, -EINVAL, "line %u: %s needs KEY=VALUE", in->line,
					    dockerfile_keyword(in->op));
			}
			if ((r = push(in, w)) < 0 || (r = push(in, strdup(""))) < 0 || (r = pair_value(in, false)) < 0)
				return r;
			continue;
		}
		w[eq] = '\0';
		if ((r = push(in, strdup(w))) < 0 || (r = push(in, strdup(w + eq + 1))) < 0 || (r = pair_value(in, true)) < 0) {
			free(w);
			return r;
		}
		free(w);
	}
}

static int parse_instr(struct df_instr *in, char *err, size_t errlen)
{
	size_t pos = 0;
	int r;
	switch (in->op) {
	case DF_RUN:
	case DF_CMD:
	case DF_ENTRYPOINT:
		if (in->op == DF_RUN && !strncmp(in->text, "--", 2))
			return errf(err, errlen, -EINVAL, "line %u: RUN flags (--mount, --network) are not supported",
				    in->line);
		if ((r = json_form(in)) != 0)
			return r < 0 ? r : 0;
		return push(in, strdup(in->text));
	case DF_COPY:
	case DF_ADD: {
		if ((r = flags(in, &pos, err, errlen)) < 0)
			return r;
		while (in->text[pos] == ' ' || in->text[pos] == '\t')
			pos++;
		char *rest = strdup(in->text + pos);
		if (!rest)
			return -ENOMEM;
		char *saved = in->text;
		in->text = rest;
		r = json_form(in);
		in->text = saved;
		free(rest);
		if (r == 0)
			r = words(in, pos, false, err, errlen);
		if (r < 0)
			return r;
		if (in->n_args < 2)
			return errf(err, errlen, -EINVAL, "line %u: %s needs a source and a destination", in->line,
				    dockerfile_keyword(in->op));
		return 0;
	}
	case DF_ENV:
	case DF_LABEL:
	case DF_ARG: {
		/* ENV KEY VALUE (the legacy form: the rest of the line is the value) */
		char *w;
		ssize_t eq;
		size_t p = 0;
		if (in->op == DF_ENV && (r = next_word(in->text, &p, &w, &eq)) == 1) {
			free(w);
			if (eq < 0) {
				size_t k = strcspn(in->text, " \t");
				size_t v = k + strspn(in->text + k, " \t");
				if (!in->text[v])
					return errf(err, errlen, -EINVAL, "line %u: ENV %s has no value", in->line, in->text);
				if ((r = push(in, strndup(in->text, k))) < 0 || (r = push(in, strdup(in->text + v))) < 0 ||
				    (r = pair_value(in, true)) < 0)
					return r;
				return 0;
			}
		}
		if ((r = words(in, 0, true, err, errlen)) < 0)
			return r;
		if (!in->n_args)
			return errf(err, errlen, -EINVAL, "line %u: %s needs an argument", in->line,
				    dockerfile_keyword(in->op));
		for (size_t i = 0; i < in->n_args; i += 2) {
			const char *k = in->args[i];
			bool ok = *k != '\0';
			for (const char *c = k; *c && in->op != DF_LABEL; c++)
				ok &= isalnum((unsigned char)*c) || *c == '_' || *c == '.' || *c == '-';
			if (!ok)
				return errf(err, errlen, -EINVAL, "line %u: '%.60s' is not a name", in->line, k);
		}
		return 0;
	}
	case DF_FROM:
		if ((r = flags(in, &pos, err, errlen)) < 0 || (r = words(in, pos, false, err, errlen)) < 0)
			return r;
		if (in->n_args == 3 && !strcasecmp(in->args[1], "as")) {
			in->as = in->args[2];
			free(in->args[1]);
			in->args[1] = NULL;
			in->n_args = 1;
		}
		if (in->n_args != 1)
			return errf(err, errlen, -EINVAL, "line %u: FROM takes BASE [AS NAME]", in->line);
		return 0;
	case DF_WORKDIR:
	case DF_USER:
		if ((r = words(in, 0, false, err, errlen)) < 0)
			return r;
		if (in->n_args != 1)
			return errf(err, errlen, -EINVAL, "line %u: %s takes one argument", in->line,
				    dockerfile_keyword(in->op));
		return 0;
	}
	return -EINVAL;
}

static int add_instr(struct dockerfile *df, const char *logical, unsigned line, char *err, size_t errlen)
{
	size_t kl = strcspn(logical, " \t");
	int op = -1;
	for (size_t k = 0; k < sizeof(keywords) / sizeof(keywords[0]); k++)
		if (strlen(keywords[k]) == kl && !strncasecmp(logical, keywords[k], kl))
			op = (int)k;
	if (op < 0)
		return errf(err, errlen, -EINVAL,
			    "line %u: instruction %.*s is not supported (FROM, RUN, COPY, ADD, ENV, WORKDIR, USER, ARG, "
			    "LABEL, ENTRYPOINT and CMD are)",
			    line, (int)(kl > 32 ? 32 : kl), logical);
	if (df->n == DF_INSTRS_MAX)
		return errf(err, errlen, -E2BIG, "line %u: more than %u instructions", line, DF_INSTRS_MAX);
	struct df_instr *v = realloc(df->v, (df->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	df->v = v;
	struct df_instr *in = &v[df->n];
	memset(in, 0, sizeof(*in));
	in->op = (enum df_op)op;
	in->line = line;
	const char *rest = logical + kl;
	rest += strspn(rest, " \t");
	size_t rl = strlen(rest);
	while (rl && (rest[rl - 1] == ' ' || rest[rl - 1] == '\t'))
		rl--;
	if (!rl) {
		return errf(err, errlen, -EINVAL, "line %u: %s needs an argument", line, keywords[op]);
	}
	if (!(in->text = strndup(rest, rl)))
		return -ENOMEM;
	df->n++;
	int r = parse_instr(in, err, errlen);
	if (r == -ENOMEM)
		return errf(err, errlen, r, "out of memory");
	if (r == -E2BIG)
		return errf(err, errlen, r, "line %u: more than %u arguments", line, DF_ARGS_MAX);
	return r;
}

int dockerfile_parse(const char *text, size_t len, struct dockerfile *ret, char *err, size_t errlen)
{
	memset(ret, 0, sizeof(*ret));
	if (len > DF_TEXT_MAX)
		return errf(err, errlen, -EFBIG, "a Dockerfile of %zu bytes (at most %u)", len, DF_TEXT_MAX);
	if (memchr(text, '\0', len))
		return errf(err, errlen, -EINVAL, "the Dockerfile holds a NUL byte");
	char *logical = malloc(DF_INSTR_MAX + 1);
	if (!logical)
		return -ENOMEM;
	size_t ll = 0;
	unsigned line = 0, start = 0;
	bool cont = false, top = true;
	int r = 0;
	for (size_t i = 0; i < len && r == 0;) {
		size_t e = i;
		while (e < len && text[e] != '\n')
			e++;
		line++;
		size_t a = i, b = e;
		i = e + 1;
		if (b > a && text[b - 1] == '\r')
			b--;
		while (a < b && (text[a] == ' ' || text[a] == '\t'))
			a++;
		if (a < b && text[a] == '#') {
			/* Parser directives (# syntax=, # escape=) only at the very top; an escape other than the
			 * default changes the language: refused rather than misread. */
			if (top && b - a >= 10 && !strncasecmp(text + a + 1, " escape=", 8) && text[a + 9] != '\\')
				r = errf(err, errlen, -EINVAL, "line %u: an escape directive other than \\ is not supported",
					 line);
			continue;
		}
		top = false;
		if (a == b && !cont)
			continue;
		if (!cont)
			start = line;
		while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t'))
			b--;
		bool more = b > a && text[b - 1] == '\\';
		if (more)
			b--;
		if (ll + (b - a) + 1 > DF_INSTR_MAX) {
			r = errf(err, errlen, -E2BIG, "line %u: an instruction longer than %u bytes", start, DF_INSTR_MAX);
			break;
		}
		memcpy(logical + ll, text + a, b - a);
		ll += b - a;
		logical[ll] = '\0';
		cont = more;
		if (!cont && ll) {
			r = add_instr(ret, logical, start, err, errlen);
			ll = 0;
		}
	}
	if (r == 0 && cont && ll)
		r = add_instr(ret, logical, start, err, errlen);
	free(logical);
	if (r == 0 && !ret->n)
		r = errf(err, errlen, -EINVAL, "the Dockerfile has no instruction");
	if (r == 0) {
		size_t i = 0;
		while (i < ret->n && ret->v[i].op == DF_ARG)
			i++;
		if (i == ret->n || ret->v[i].op != DF_FROM)
			r = errf(err, errlen, -EINVAL, "line %u: the first instruction must be FROM (ARG may come before it)",
				 ret->v[i < ret->n ? i : 0].line);
	}
	if (r < 0)
		dockerfile_free(ret);
	return r;
}

struct out {
	char *s;
	size_t n, cap;
};

static int out_put(struct out *o, const char *p, size_t n)
{
	if (o->n + n > DF_EXPAND_MAX)
		return -E2BIG;
	if (o->n + n + 1 > o->cap) {
		size_t cap = (o->n + n + 1) * 2;
		char *s = realloc(o->s, cap);
		if (!s)
			return -ENOMEM;
		o->s = s;
		o->cap = cap;
	}
	memcpy(o->s + o->n, p, n);
	o->n += n;
	o->s[o->n] = '\0';
	return 0;
}

static const char *lookup(const char *const *vars, const char *name, size_t n)
{
	const char *v = NULL;
	for (const char *const *e = vars; e && *e; e++)
		if (!strncmp(*e, name, n) && (*e)[n] == '=')
			v = *e + n + 1; /* the last one wins */
	return v;
}

static int expand(const char *w, const char *const *vars, bool quotes, int depth, struct out *o, char *err,
		  size_t errlen);

static int variable(const char **pw, const char *const *vars, bool quotes, int depth, struct out *o, char *err,
		    size_t errlen)
{
	const char *p = *pw + 1; /* past '$' */
	int r;
	if (*p == '{') {
		const char *name = ++p;
		while (isalnum((unsigned char)*p) || *p == '_')
			p++;
		size_t nl = (size_t)(p - name);
		if (!nl)
			return errf(err, errlen, -EINVAL, "a bad ${...} substitution");
		const char *val = lookup(vars, name, nl);
		if (*p == '}') {
			*pw = p + 1;
			return val ? out_put(o, val, strlen(val)) : 0;
		}
		if (*p != ':' || (p[1] != '-' && p[1] != '+'))
			return errf(err, errlen, -EINVAL, "a bad ${...} substitution (only ${N}, ${N:-word}, ${N:+word})");
		char op = p[1];
		const char *wstart = p + 2;
		int level = 1;
		for (p = wstart; *p && level; p++) {
			if (*p == '\\' && p[1])
				p++;
			else if (*p == '{')
				level++;
			else if (*p == '}')
				level--;
		}
		if (level)
			return errf(err, errlen, -EINVAL, "an unterminated ${");
		*pw = p;
		bool set = val && *val;
		if (op == '-' && set)
			return out_put(o, val, strlen(val));
		if ((op == '-' && !set) || (op == '+' && set)) {
			if (depth >= EXPAND_DEPTH)
				return errf(err, errlen, -EINVAL, "substitutions nested too deep");
			char *word = strndup(wstart, (size_t)(p - 1 - wstart));
			if (!word)
				return -ENOMEM;
			r = expand(word, vars, quotes, depth + 1, o, err, errlen);
			free(word);
			return r;
		}
		return 0;
	}
	const char *name = p;
	while (isalnum((unsigned char)*p) || *p == '_')
		p++;
	if (p == name) {
		*pw = p;
		return out_put(o, "$", 1);
	}
	const char *val = lookup(vars, name, (size_t)(p - name));
	*pw = p;
	return val ? out_put(o, val, strlen(val)) : 0;
}

static int expand(const char *w, const char *const *vars, bool quotes, int depth, struct out *o, char *err,
		  size_t errlen)
{
	int r = 0;
	char q = 0;
	for (const char *p = w; *p && r == 0;) {
		char c = *p;
		if (quotes && q == '\'') {
			if (c == '\'')
				q = 0;
			else
				r = out_put(o, p, 1);
			p++;
		} else if (quotes && !q && (c == '\'' || c == '"')) {
			q = c;
			p++;
		} else if (quotes && q == '"' && c == '"') {
			q = 0;
			p++;
		} else if (c == '\\' && p[1] && (!q || p[1] == '"' || p[1] == '\\' || p[1] == '$')) {
			r = out_put(o, p + 1, 1);
			p += 2;
		} else if (c == '$') {
			r = variable(&p, vars, quotes, depth, o, err, errlen);
		} else {
			r = out_put(o, p, 1);
			p++;
		}
	}
	if (r == 0 && q)
		r = errf(err, errlen, -EINVAL, "an unterminated quote");
	if (r == -E2BIG)
		errf(err, errlen, r, "a word past %u bytes after substitution", DF_EXPAND_MAX);
	return r;
}

int dockerfile_expand(const char *word, const char *const *vars, char **ret, char *err, size_t errlen)
{
	struct out o = { 0 };
	int r = out_put(&o, "", 0);
	if (r == 0)
		r = expand(word, vars, true, 0, &o, err, errlen);
	if (r < 0) {
		free(o.s);
		return r;
	}
	*ret = o.s;
	return 0;
}
