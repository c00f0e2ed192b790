/* kafkaverify driver over librdkafka's C API, protocol 1 (docs/drivers.md): JSON lines, requests
 * on stdin, answers on stdout, logs on stderr. One process is one client instance. JSON by
 * jansson. Sends are asynchronous: each is answered from librdkafka's delivery report, which a
 * poller thread serves; only a send refused before it was queued is `definite`. */
#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static rd_kafka_t *rk = NULL;
static int is_producer = 0;
static volatile int stopping = 0;
static pthread_t poller;
static int poller_started = 0;

static void emit(json_t *obj) {
    char *s = json_dumps(obj, JSON_COMPACT);
    pthread_mutex_lock(&out_lock);
    fputs(s, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    pthread_mutex_unlock(&out_lock);
    free(s);
    json_decref(obj);
}

static json_t *answer(json_int_t id, const char *type) {
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(id));
    json_object_set_new(o, "type", json_string(type));
    return o;
}

static void answer_error(json_int_t id, const char *err, int definite) {
    json_t *o = answer(id, "error");
    json_object_set_new(o, "error", json_string(err));
    json_object_set_new(o, "definite", json_boolean(definite));
    emit(o);
}

static void protocol_error(json_t *id, const char *err) {
    json_t *o = json_object();
    json_object_set(o, "id", id ? id : json_null());
    json_object_set_new(o, "type", json_string("protocol-error"));
    json_object_set_new(o, "error", json_string(err));
    emit(o);
}

/* delivery report: the client's word on one send */
static void on_delivery(rd_kafka_t *k, const rd_kafka_message_t *m, void *opaque) {
    (void)k; (void)opaque;
    json_int_t id = (json_int_t)(intptr_t)m->_private;
    if (m->err) {
        /* never definite: librdkafka's own persistence status is named, not trusted (it calls a
         * batch NOT_PERSISTED after NOT_LEADER_OR_FOLLOWER although the new leader may hold it) */
        static const char *status[] = {"NOT_PERSISTED", "POSSIBLY_PERSISTED", "PERSISTED"};
        rd_kafka_msg_status_t st = rd_kafka_message_status(m);
        char buf[600];
        snprintf(buf, sizeof buf, "%s: %s (librdkafka: %s)", rd_kafka_err2name(m->err), rd_kafka_err2str(m->err),
                 st >= 0 && st <= 2 ? status[st] : "?");
        answer_error(id, buf, 0);
        return;
    }
    json_t *o = answer(id, "ok");
    json_object_set_new(o, "partition", json_integer(m->partition));
    json_object_set_new(o, "offset", json_integer(m->offset));
    emit(o);
}

static void on_log(const rd_kafka_t *k, int level, const char *fac, const char *buf) {
    (void)k;
    fprintf(stderr, "[librdkafka %d %s] %s\n", level, fac, buf);
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *poll_loop(void *arg) {
    (void)arg;
    while (!stopping) rd_kafka_poll(rk, 100);
    return NULL;
}

static const char *setting_str(json_t *settings, const char *key, char *buf, size_t n) {
    json_t *v = json_object_get(settings, key);
    if (!v || json_is_null(v)) return NULL;
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_boolean(v)) return json_is_true(v) ? "true" : "false";
    if (json_is_integer(v)) { snprintf(buf, n, "%lld", (long long)json_integer_value(v)); return buf; }
    return NULL;
}

/* sets name=value on conf; on a refusal writes the client's words into refused */
static int set(rd_kafka_conf_t *conf, const char *name, const char *value, char *refused, size_t n) {
    char err[512];
    if (!value) return 0;
    if (rd_kafka_conf_set(conf, name, value, err, sizeof err) != RD_KAFKA_CONF_OK) {
        snprintf(refused, n, "%s", err);
        return -1;
    }
    return 0;
}

static const char *EFFECTIVE_PRODUCER[] = {"acks", "retries", "max.in.flight.requests.per.connection",
                                           "enable.idempotence", "request.timeout.ms", "message.timeout.ms", NULL};
static const char *EFFECTIVE_CONSUMER[] = {"group.id", "isolation.level", "auto.offset.reset",
                                           "enable.auto.commit", NULL};

static void configure(json_int_t id, json_t *req) {
    json_t *settings = json_object_get(req, "settings");
    json_t *options = json_object_get(req, "options");
    const char *role = json_string_value(json_object_get(req, "role"));
    const char *bootstrap = json_string_value(json_object_get(req, "bootstrap"));
    int probe = json_is_true(json_object_get(req, "probe"));
    char refused[512] = "", b1[64], b2[64], b3[64];
    json_t *o;
    if (rk) {
        o = json_object();
        json_object_set_new(o, "id", json_integer(id));
        json_object_set_new(o, "ok", json_false());
        json_object_set_new(o, "refused", json_string("already configured"));
        emit(o);
        return;
    }
    if (!role || (strcmp(role, "producer") && strcmp(role, "consumer")) || !bootstrap) {
        protocol_error(json_object_get(req, "id"), "configure needs role producer|consumer and bootstrap");
        return;
    }
    if (!settings) settings = json_object();
    else json_incref(settings);
    is_producer = !strcmp(role, "producer");
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, on_log);
    int bad = set(conf, "bootstrap.servers", bootstrap, refused, sizeof refused);
    if (is_producer) {
        bad = bad || set(conf, "acks", setting_str(settings, "acks", b1, sizeof b1), refused, sizeof refused);
        bad = bad || set(conf, "retries", setting_str(settings, "retries", b2, sizeof b2), refused, sizeof refused);
        bad = bad || set(conf, "max.in.flight.requests.per.connection",
                         setting_str(settings, "max_in_flight", b3, sizeof b3), refused, sizeof refused);
        bad = bad || set(conf, "enable.idempotence", setting_str(settings, "idempotence", b1, sizeof b1),
                         refused, sizeof refused);
        bad = bad || set(conf, "request.timeout.ms", setting_str(settings, "request_timeout_ms", b2, sizeof b2),
                         refused, sizeof refused);
        bad = bad || set(conf, "message.timeout.ms", "30000", refused, sizeof refused);
        bad = bad || set(conf, "linger.ms", "0", refused, sizeof refused);
        bad = bad || set(conf, "retry.backoff.ms", "100", refused, sizeof refused);
        rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    } else {
        const char *g = setting_str(settings, "group", b1, sizeof b1);
        bad = bad || set(conf, "group.id", g ? g : "kafkaverify", refused, sizeof refused);
        bad = bad || set(conf, "isolation.level", setting_str(settings, "isolation", b2, sizeof b2), refused, sizeof refused);
        const char *r = setting_str(settings, "auto_offset_reset", b3, sizeof b3);
        bad = bad || set(conf, "auto.offset.reset", r ? r : "earliest", refused, sizeof refused);
        bad = bad || set(conf, "enable.auto.commit", "false", refused, sizeof refused);
        bad = bad || set(conf, "enable.partition.eof", "false", refused, sizeof refused);
    }
    const char *k;
    json_t *v;
    if (options) json_object_foreach(options, k, v) {
        char vb[64];
        const char *s = json_is_string(v) ? json_string_value(v) : setting_str(options, k, vb, sizeof vb);
        bad = bad || set(conf, k, s, refused, sizeof refused);
    }
    json_decref(settings);
    if (!bad) {
        rk = rd_kafka_new(is_producer ? RD_KAFKA_PRODUCER : RD_KAFKA_CONSUMER, conf, refused, sizeof refused);
        if (!rk) bad = 1;                           /* rd_kafka_new destroys conf only on success */
    }
    if (bad) {
        if (!rk) rd_kafka_conf_destroy(conf);
        o = json_object();
        json_object_set_new(o, "id", json_integer(id));
        json_object_set_new(o, "ok", json_false());
        json_object_set_new(o, "refused", json_string(refused));
        emit(o);
        return;
    }
    json_t *eff = json_object();
    const rd_kafka_conf_t *c = rd_kafka_conf(rk);
    for (const char **n = is_producer ? EFFECTIVE_PRODUCER : EFFECTIVE_CONSUMER; *n; n++) {
        char val[256];
        size_t sz = sizeof val;
        if (rd_kafka_conf_get(c, *n, val, &sz) == RD_KAFKA_CONF_OK) json_object_set_new(eff, *n, json_string(val));
    }
    if (probe) {                /* configuration only: leave before anything is sent */
        rd_kafka_destroy(rk);
        rk = NULL;
    } else if (is_producer) {
        pthread_create(&poller, NULL, poll_loop, NULL);
        poller_started = 1;
    } else {
        rd_kafka_poll_set_consumer(rk);
    }
    o = json_object();
    json_object_set_new(o, "id", json_integer(id));
    json_object_set_new(o, "ok", json_true());
    json_object_set_new(o, "effective", eff);
    emit(o);
}

static void send_one(json_int_t id, json_t *req) {
    if (!rk || !is_producer) { answer_error(id, "not configured as a producer", 1); return; }
    const char *topic = json_string_value(json_object_get(req, "topic"));
    json_t *jp = json_object_get(req, "partition");
    const char *key = json_string_value(json_object_get(req, "key"));
    const char *value = json_string_value(json_object_get(req, "value"));
    if (!topic) { protocol_error(json_object_get(req, "id"), "send needs a topic"); return; }
    int32_t part = json_is_integer(jp) ? (int32_t)json_integer_value(jp) : RD_KAFKA_PARTITION_UA;
    rd_kafka_resp_err_t err = rd_kafka_producev(
        rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(part),
        RD_KAFKA_V_KEY(key, key ? strlen(key) : 0),
        RD_KAFKA_V_VALUE((void *)value, value ? strlen(value) : 0),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE((void *)(intptr_t)id), RD_KAFKA_V_END);
    if (err) {           /* refused before it was queued: it was never sent */
        char buf[512];
        snprintf(buf, sizeof buf, "%s: %s", rd_kafka_err2name(err), rd_kafka_err2str(err));
        answer_error(id, buf, 1);
    }
}

static rd_kafka_topic_partition_list_t *partition_list(json_t *arr, int with_offset) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(json_array_size(arr) + 1);
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        const char *t = json_string_value(json_array_get(e, 0));
        if (!t) continue;
        rd_kafka_topic_partition_t *tp =
            rd_kafka_topic_partition_list_add(l, t, (int32_t)json_integer_value(json_array_get(e, 1)));
        if (with_offset) tp->offset = json_integer_value(json_array_get(e, 2));
    }
    return l;
}

static void consumer_op(json_int_t id, const char *op, json_t *req) {
    if (!rk || is_producer) { answer_error(id, "not configured as a consumer", 1); return; }
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (!strcmp(op, "assign")) {
        rd_kafka_topic_partition_list_t *l = partition_list(json_object_get(req, "partitions"), 0);
        err = rd_kafka_assign(rk, l);
        rd_kafka_topic_partition_list_destroy(l);
    } else if (!strcmp(op, "subscribe")) {
        json_t *topics = json_object_get(req, "topics"), *t;
        size_t i;
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(json_array_size(topics) + 1);
        json_array_foreach(topics, i, t) rd_kafka_topic_partition_list_add(l, json_string_value(t), RD_KAFKA_PARTITION_UA);
        err = rd_kafka_subscribe(rk, l);
        rd_kafka_topic_partition_list_destroy(l);
    } else if (!strcmp(op, "commit")) {
        rd_kafka_topic_partition_list_t *l = partition_list(json_object_get(req, "offsets"), 1);
        err = rd_kafka_commit(rk, l, 0);
        rd_kafka_topic_partition_list_destroy(l);
    } else {            /* poll: what arrives within timeout_ms, returned once something has */
        json_int_t timeout = json_integer_value(json_object_get(req, "timeout_ms"));
        json_t *records = json_array();
        rd_kafka_message_t *m;
        int64_t end = now_ms() + timeout;
        for (;;) {
            int64_t left = json_array_size(records) ? 0 : end - now_ms();
            m = rd_kafka_consumer_poll(rk, left > 0 ? (int)left : 0);
            if (!m) {
                if (json_array_size(records) || now_ms() >= end) break;
                continue;
            }
            if (m->err) {
                char buf[512];
                snprintf(buf, sizeof buf, "%s: %s", rd_kafka_err2name(m->err), rd_kafka_message_errstr(m));
                rd_kafka_message_destroy(m);
                json_decref(records);
                answer_error(id, buf, 0);
                return;
            }
            json_t *r = json_object();
            json_object_set_new(r, "topic", json_string(rd_kafka_topic_name(m->rkt)));
            json_object_set_new(r, "partition", json_integer(m->partition));
            json_object_set_new(r, "offset", json_integer(m->offset));
            json_object_set_new(r, "key", m->key ? json_stringn(m->key, m->key_len) : json_null());
            json_object_set_new(r, "value", m->payload ? json_stringn(m->payload, m->len) : json_null());
            json_array_append_new(records, r);
            rd_kafka_message_destroy(m);
            if (json_array_size(records) >= 500) break;
        }
        json_t *o = answer(id, "ok");
        json_object_set_new(o, "records", records);
        emit(o);
        return;
    }
    if (err) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s: %s", rd_kafka_err2name(err), rd_kafka_err2str(err));
        answer_error(id, buf, 0);
    } else {
        emit(answer(id, "ok"));
    }
}

static void shut(void) {
    if (!rk) return;
    if (is_producer) {
        rd_kafka_flush(rk, 10000);
        stopping = 1;
        if (poller_started) pthread_join(poller, NULL);
    } else {
        rd_kafka_consumer_close(rk);
    }
    rd_kafka_destroy(rk);
    rk = NULL;
}

int main(void) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    json_t *hello = json_object(), *h = json_object();
    json_object_set_new(h, "protocol", json_integer(1));
    json_object_set_new(h, "client", json_string("librdkafka"));
    json_object_set_new(h, "client_version", json_string(rd_kafka_version_str()));
    json_object_set_new(h, "language", json_string("c"));
    json_object_set_new(hello, "hello", h);
    emit(hello);
    while ((n = getline(&line, &cap, stdin)) > 0) {
        if (n <= 1) continue;
        json_error_t jerr;
        json_t *req = json_loads(line, 0, &jerr);
        if (!req) {
            char buf[300];
            snprintf(buf, sizeof buf, "malformed JSON: %s", jerr.text);
            protocol_error(NULL, buf);
            continue;
        }
        json_t *jid = json_object_get(req, "id");
        const char *op = json_string_value(json_object_get(req, "op"));
        if (!json_is_object(req) || !json_is_integer(jid)) {
            protocol_error(json_is_integer(jid) ? jid : NULL, "a request is an object with an integer id");
        } else if (!op) {
            protocol_error(jid, "a request needs an op");
        } else {
            json_int_t id = json_integer_value(jid);
            if (!strcmp(op, "configure")) configure(id, req);
            else if (!strcmp(op, "send")) send_one(id, req);
            else if (!strcmp(op, "flush")) {
                json_int_t t = json_integer_value(json_object_get(req, "timeout_ms"));
                rd_kafka_resp_err_t err = rk && is_producer ? rd_kafka_flush(rk, t > 0 ? (int)t : 30000) : 0;
                if (err) answer_error(id, rd_kafka_err2str(err), 0);
                else emit(answer(id, "ok"));
            } else if (!strcmp(op, "assign") || !strcmp(op, "subscribe") || !strcmp(op, "poll") || !strcmp(op, "commit"))
                consumer_op(id, op, req);
            else if (!strcmp(op, "close")) {
                shut();
                emit(answer(id, "ok"));
                json_decref(req);
                break;
            } else {
                char buf[200];
                snprintf(buf, sizeof buf, "unknown op \"%.100s\"", op);
                protocol_error(jid, buf);
            }
        }
        json_decref(req);
    }
    free(line);
    shut();               /* stdin closed or close: whatever is pending is flushed (bounded) */
    return 0;
}
