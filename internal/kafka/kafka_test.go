package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"seckill/internal/embedded"
	"seckill/internal/kafka"
	"seckill/internal/relay"
	"seckill/internal/sale"
	"seckill/internal/saletest"
	"seckill/internal/sqlstore"
)

const topic = "seckill.orders"

// cluster is franz-go's in-process Kafka-protocol broker (no Kafka can be installed here): three
// brokers, the topic in three partitions.
func cluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// reminders is how many wave reminders relayTo writes of OrderChanges' activity.
const reminders = 3

// relayTo makes OrderChanges' 30 orders on a SQLite store, writes the reminders of three waves
// of their activity, and relays their events to sink.
func relayTo(t *testing.T, sink *kafka.Sink) []string {
	t.Helper()
	store, err := sqlstore.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	store.EmitTo(sink.Name())
	tokens := saletest.OrderChanges(t, store, 30)
	for k := int64(1); k <= reminders; k++ {
		w := &sale.WaveOpening{ActivityID: "a", ActivityName: "A", Wave: k, OpensAt: saletest.T0.Add(time.Duration(k) * time.Minute), Reserved: 10}
		if ok, err := store.RemindWave(context.Background(), sale.Event{ID: sale.WaveOpeningID("a", k), Type: sale.EventWaveOpening,
			At: saletest.T0, Order: sale.Order{ActivityID: "a"}, Wave: w}); err != nil || !ok {
			t.Fatalf("wave %d's reminder: %v, %v", k, ok, err)
		}
	}
	r := &relay.Relay{Store: store, Sink: sink, Lease: embedded.NewLease(time.Now), Holder: "node-1",
		Log: slog.New(slog.DiscardHandler), Backoff: func(int) time.Duration { return 0 },
		Failed: func(d sale.EventDelivery, err error, parked bool) { t.Logf("%s: %v", d.ID, err) }}
	for range 100 {
		n, err := r.Round(context.Background())
		if err != nil {
			t.Logf("round: %v", err)
		}
		if n == 0 {
			left, err := store.Deliveries(context.Background(), sale.DeliveryFilter{State: sale.DeliveryPending, Limit: 10})
			if err != nil || len(left) != 0 {
				t.Fatalf("pending after the relay: %v, %v", left, err)
			}
			return tokens
		}
	}
	t.Fatal("100 rounds and events still due")
	return nil
}

type record struct {
	partition int32
	id, typ   string
}

// consume reads the topic from the start until it holds want records, or 10 s.
func consume(t *testing.T, c *kfake.Cluster, want int) map[string][]record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	byKey := map[string][]record{}
	n := 0
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for n < want && ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 100)
		fs.EachRecord(func(r *kgo.Record) {
			var m relay.Message
			if err := json.Unmarshal(r.Value, &m); err != nil {
				t.Errorf("record %s: %v", r.Value, err)
			}
			h := map[string]string{}
			for _, kv := range r.Headers {
				h[kv.Key] = string(kv.Value)
			}
			subject := ""
			switch {
			case m.Order != nil:
				subject = m.Order.Token
			case m.Activity != nil:
				subject = sale.ActivitySubject(m.Activity.ID)
			}
			if m.ID != h[kafka.HeaderEventID] || m.Type != h[kafka.HeaderEventType] || subject != string(r.Key) {
				t.Errorf("record key %s headers %v value %s", r.Key, h, r.Value)
			}
			byKey[string(r.Key)] = append(byKey[string(r.Key)], record{r.Partition, m.ID, m.Type})
			n++
		})
	}
	if n != want {
		t.Fatalf("the topic holds %d records after 10 s; want %d", n, want)
	}
	return byKey
}

// check holds the topic to the orders: each order's events once, in order, on one partition;
// and the activity's reminders once each, in the order of their waves, on one partition.
func check(t *testing.T, tokens []string, byKey map[string][]record) {
	t.Helper()
	rs := byKey[sale.ActivitySubject("a")]
	if len(rs) != reminders {
		t.Errorf("the activity's reminders: %v; want %d", rs, reminders)
	}
	for i, r := range rs {
		if r.id != sale.WaveOpeningID("a", int64(i+1)) || r.typ != string(sale.EventWaveOpening) || r.partition != rs[0].partition {
			t.Errorf("the activity's record %d: %+v; want wave %d's reminder on partition %d", i, r, i+1, rs[0].partition)
		}
	}
	partitions := map[int32]bool{}
	for i, tok := range tokens {
		rs := byKey[tok]
		var types []string
		for _, r := range rs {
			types = append(types, r.typ)
			partitions[r.partition] = true
			if r.partition != rs[0].partition {
				t.Errorf("order %s on partitions %d and %d", tok, rs[0].partition, r.partition)
			}
		}
		if want := saletest.OrderChangeTypes(i); !slices.Equal(types, want) {
			t.Errorf("order %s: %v, want %v", tok, types, want)
		}
	}
	if len(partitions) < 2 {
		t.Errorf("30 orders all on partition(s) %v: the key does not spread them", partitions)
	}
}

// TestSinkProducesEveryEventInOrder: the relay's events land on the topic once each, an order's
// on one partition in the order they happened.
func TestSinkProducesEveryEventInOrder(t *testing.T) {
	c := cluster(t)
	sink, err := kafka.New(c.ListenAddrs(), topic)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if sink.Name() != "kafka:"+topic {
		t.Fatalf("name %q", sink.Name())
	}
	tokens := relayTo(t, sink)
	check(t, tokens, consume(t, c, 60+reminders))
}

// TestSinkRetriesAreWrittenOnce: the brokers drop the first produce requests' connections; the
// idempotent producer tries again, and the topic still holds every event once.
func TestSinkRetriesAreWrittenOnce(t *testing.T) {
	c := cluster(t)
	var dropped atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if dropped.Add(1) < 3 {
			c.KeepControl()
			return nil, errors.New("injected: the connection drops"), true
		}
		return nil, nil, false
	})
	sink, err := kafka.New(c.ListenAddrs(), topic)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	tokens := relayTo(t, sink)
	if dropped.Load() < 3 {
		t.Fatalf("%d produce requests seen; the injected failures did not happen", dropped.Load())
	}
	check(t, tokens, consume(t, c, 60+reminders))
}

// TestSinkFailsWithoutACluster: a delivery to brokers that are gone is an error, for the relay
// to retry.
func TestSinkFailsWithoutACluster(t *testing.T) {
	c := cluster(t)
	addrs := c.ListenAddrs()
	c.Close()
	sink, err := kafka.New(addrs, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	e := sale.Event{ID: "g1.created", Type: sale.EventCreated, At: time.Now(), Order: sale.Order{Token: "g1"}}
	if err := sink.Deliver(ctx, e); err == nil {
		t.Fatal("a delivery with no cluster succeeded")
	}
}

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		brokers []string
		topic   string
		want    string
	}{
		{nil, topic, "no brokers"},
		{[]string{"127.0.0.1:9092"}, "", "topic"},
		{[]string{"127.0.0.1:9092"}, "orders/2026", "topic"},
		{[]string{"127.0.0.1:9092"}, strings.Repeat("t", 250), "topic"},
	} {
		if _, err := kafka.New(tc.brokers, tc.topic); !errors.Is(err, sale.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%v, %q): %v, want ErrInvalid about %s", tc.brokers, tc.topic, err, tc.want)
		}
	}
}
