// kafkaverify driver over sarama (Debian's golang-github-shopify-sarama-dev, 1.22.1), protocol 1
// (docs/drivers.md): JSON lines, requests on stdin, answers on stdout, logs on stderr. One
// process is one client instance. Built offline in GOPATH mode by the Makefile beside it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

const clientVersion = "1.22.1" // Debian's golang-github-shopify-sarama-dev (sarama has no version constant)

var (
	outMu    sync.Mutex
	out      = bufio.NewWriter(os.Stdout)
	producer sarama.AsyncProducer
	client   sarama.Client
	consumer sarama.Consumer
	group    sarama.ConsumerGroup
	records  = make(chan map[string]interface{}, 10000)
	sessMu   sync.Mutex
	session  sarama.ConsumerGroupSession
	pending  sync.WaitGroup
)

func emit(m map[string]interface{}) {
	b, _ := json.Marshal(m)
	outMu.Lock()
	out.Write(b)
	out.WriteByte('\n')
	out.Flush()
	outMu.Unlock()
}

func answer(id interface{}, typ string, extra map[string]interface{}) {
	m := map[string]interface{}{"id": id, "type": typ}
	for k, v := range extra {
		m[k] = v
	}
	emit(m)
}

func errorAnswer(id interface{}, err string, definite bool) {
	answer(id, "error", map[string]interface{}{"error": err, "definite": definite})
}

type request struct {
	ID         *int64                 `json:"id"`
	Op         string                 `json:"op"`
	Role       string                 `json:"role"`
	Bootstrap  string                 `json:"bootstrap"`
	Settings   map[string]interface{} `json:"settings"`
	Options    map[string]interface{} `json:"options"`
	Probe      bool                   `json:"probe"`
	Topic      string                 `json:"topic"`
	Partition  *int32                 `json:"partition"`
	Key        *string                `json:"key"`
	Value      *string                `json:"value"`
	Partitions [][]interface{}        `json:"partitions"`
	Topics     []string               `json:"topics"`
	Group      string                 `json:"group"`
	TimeoutMs  int                    `json:"timeout_ms"`
	Offsets    [][]interface{}        `json:"offsets"`
}

func num(v interface{}) (int, bool) {
	switch x := v.(type) {
	case float64:
		return int(x), true
	case string:
		n, err := strconv.Atoi(x)
		return n, err == nil
	}
	return 0, false
}

// the audit's settings in sarama's own option names
func config(r *request) (*sarama.Config, map[string]interface{}) {
	c := sarama.NewConfig()
	c.Version = sarama.V2_0_0_0
	c.ClientID = "kafkaverify"
	s := r.Settings
	if ms, ok := num(s["request_timeout_ms"]); ok {
		c.Net.ReadTimeout = time.Duration(ms) * time.Millisecond
		c.Net.DialTimeout = time.Duration(ms) * time.Millisecond
		c.Net.WriteTimeout = time.Duration(ms) * time.Millisecond
	}
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Retry.Backoff = 100 * time.Millisecond
	if a, ok := s["acks"]; ok && a != nil {
		if fmt.Sprint(a) == "all" || fmt.Sprint(a) == "-1" {
			c.Producer.RequiredAcks = sarama.WaitForAll
		} else if n, ok := num(a); ok {
			c.Producer.RequiredAcks = sarama.RequiredAcks(n)
		}
	}
	if n, ok := num(s["retries"]); ok {
		c.Producer.Retry.Max = n
	}
	if n, ok := num(s["max_in_flight"]); ok {
		c.Net.MaxOpenRequests = n
	}
	if b, ok := s["idempotence"].(bool); ok {
		c.Producer.Idempotent = b
	}
	if g, ok := s["isolation"].(string); ok && g == "read_committed" {
		c.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	if aor, ok := s["auto_offset_reset"].(string); !ok || aor == "earliest" {
		c.Consumer.Offsets.Initial = sarama.OffsetOldest
	}
	c.Consumer.Offsets.CommitInterval = 100 * time.Millisecond
	for k, v := range r.Options { // client-native overrides, by sarama's field path
		n, _ := num(v)
		switch k {
		case "Producer.Retry.Max":
			c.Producer.Retry.Max = n
		case "Net.MaxOpenRequests":
			c.Net.MaxOpenRequests = n
		case "Producer.Idempotent":
			c.Producer.Idempotent = v == true
		}
	}
	eff := map[string]interface{}{
		"Producer.RequiredAcks": int(c.Producer.RequiredAcks), "Producer.Retry.Max": c.Producer.Retry.Max,
		"Net.MaxOpenRequests": c.Net.MaxOpenRequests, "Producer.Idempotent": c.Producer.Idempotent,
		"Net.ReadTimeout": c.Net.ReadTimeout.String(), "Version": c.Version.String(),
	}
	return c, eff
}

func configure(r *request) {
	if producer != nil || client != nil {
		emit(map[string]interface{}{"id": *r.ID, "ok": false, "refused": "already configured"})
		return
	}
	c, eff := config(r)
	if err := c.Validate(); err != nil {
		emit(map[string]interface{}{"id": *r.ID, "ok": false, "refused": err.Error()})
		return
	}
	if r.Probe {
		emit(map[string]interface{}{"id": *r.ID, "ok": true, "effective": eff})
		return
	}
	var err error
	client, err = sarama.NewClient(strings.Split(r.Bootstrap, ","), c)
	if err == nil && r.Role == "producer" {
		producer, err = sarama.NewAsyncProducerFromClient(client)
		if err == nil {
			go func() {
				for m := range producer.Successes() {
					answer(m.Metadata, "ok", map[string]interface{}{"partition": m.Partition, "offset": m.Offset})
					pending.Done()
				}
			}()
			go func() {
				for e := range producer.Errors() {
					errorAnswer(e.Msg.Metadata, e.Err.Error(), false)
					pending.Done()
				}
			}()
		}
	} else if err == nil && r.Role == "consumer" {
		consumer, err = sarama.NewConsumerFromClient(client)
		if err == nil {
			g, _ := r.Settings["group"].(string)
			if g == "" {
				g = "kafkaverify"
			}
			group, err = sarama.NewConsumerGroupFromClient(g, client)
		}
	} else if err == nil {
		err = fmt.Errorf("unknown role %q", r.Role)
	}
	if err != nil {
		emit(map[string]interface{}{"id": *r.ID, "ok": false, "refused": err.Error()})
		return
	}
	emit(map[string]interface{}{"id": *r.ID, "ok": true, "effective": eff})
}

type handler struct{}

func (handler) Setup(s sarama.ConsumerGroupSession) error {
	sessMu.Lock()
	session = s
	sessMu.Unlock()
	return nil
}
func (handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		records <- record(m)
	}
	return nil
}

func record(m *sarama.ConsumerMessage) map[string]interface{} {
	var k interface{}
	if m.Key != nil {
		k = string(m.Key)
	}
	return map[string]interface{}{"topic": m.Topic, "partition": m.Partition, "offset": m.Offset, "key": k,
		"value": string(m.Value)}
}

func handle(r *request) {
	id := *r.ID
	switch r.Op {
	case "configure":
		configure(r)
	case "send":
		if producer == nil {
			errorAnswer(id, "not configured as a producer", true)
			return
		}
		m := &sarama.ProducerMessage{Topic: r.Topic, Metadata: id}
		if r.Partition != nil {
			m.Partition = *r.Partition
		}
		if r.Key != nil {
			m.Key = sarama.StringEncoder(*r.Key)
		}
		if r.Value != nil {
			m.Value = sarama.StringEncoder(*r.Value)
		}
		pending.Add(1)
		producer.Input() <- m
	case "flush":
		done := make(chan struct{})
		go func() { pending.Wait(); close(done) }()
		go func() {
			select {
			case <-done:
				answer(id, "ok", nil)
			case <-time.After(flushTimeout(r.TimeoutMs)):
				errorAnswer(id, "flush: sends still unanswered after "+flushTimeout(r.TimeoutMs).String(), false)
			}
		}()
	case "assign":
		if consumer == nil {
			errorAnswer(id, "not configured as a consumer", true)
			return
		}
		for _, tp := range r.Partitions {
			t, _ := tp[0].(string)
			p, _ := num(tp[1])
			pc, err := consumer.ConsumePartition(t, int32(p), client.Config().Consumer.Offsets.Initial)
			if err != nil {
				errorAnswer(id, err.Error(), false)
				return
			}
			go func() {
				for m := range pc.Messages() {
					records <- record(m)
				}
			}()
		}
		answer(id, "ok", nil)
	case "subscribe":
		if group == nil {
			errorAnswer(id, "not configured as a consumer", true)
			return
		}
		topics := r.Topics
		go func() {
			for {
				if err := group.Consume(context.Background(), topics, handler{}); err != nil {
					log.Printf("consumer group: %v", err)
					if err == sarama.ErrClosedConsumerGroup {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
		answer(id, "ok", nil)
	case "poll":
		got := []map[string]interface{}{}
		timeout := time.After(time.Duration(r.TimeoutMs) * time.Millisecond)
	wait:
		for {
			if len(got) > 0 {
				select {
				case m := <-records:
					got = append(got, m)
				default:
					break wait
				}
			} else {
				select {
				case m := <-records:
					got = append(got, m)
				case <-timeout:
					break wait
				}
			}
		}
		answer(id, "ok", map[string]interface{}{"records": got})
	case "commit":
		sessMu.Lock()
		s := session
		sessMu.Unlock()
		if s == nil {
			errorAnswer(id, "no group session: subscribe first (sarama commits through its group session)", false)
			return
		}
		for _, o := range r.Offsets {
			t, _ := o[0].(string)
			p, _ := num(o[1])
			off, _ := num(o[2])
			s.MarkOffset(t, int32(p), int64(off), "")
		}
		answer(id, "ok", nil) // marked: sarama 1.22 commits marked offsets every Consumer.Offsets.CommitInterval
	case "close":
		shut()
		answer(id, "ok", nil)
		os.Exit(0)
	default:
		answer(id, "protocol-error", map[string]interface{}{"error": fmt.Sprintf("unknown op %q", r.Op)})
	}
}

func flushTimeout(ms int) time.Duration {
	if ms <= 0 {
		ms = 30000
	}
	return time.Duration(ms) * time.Millisecond
}

func shut() {
	if producer != nil {
		producer.AsyncClose()
		done := make(chan struct{})
		go func() { pending.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
		producer = nil
	}
	if group != nil {
		group.Close()
	}
	if consumer != nil {
		consumer.Close()
	}
	if client != nil {
		client.Close()
	}
}

func main() {
	log.SetOutput(os.Stderr)
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags)
	emit(map[string]interface{}{"hello": map[string]interface{}{"protocol": 1, "client": "sarama",
		"client_version": clientVersion, "language": "go"}})
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	for in.Scan() {
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		var r request
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			emit(map[string]interface{}{"id": nil, "type": "protocol-error", "error": "malformed JSON: " + err.Error()})
			continue
		}
		if r.ID == nil {
			emit(map[string]interface{}{"id": nil, "type": "protocol-error", "error": "a request is an object with an integer id"})
			continue
		}
		handle(&r)
	}
	shut()
}
