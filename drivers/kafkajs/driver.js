#!/usr/bin/env node
// kafkaverify driver over kafkajs, protocol 1 (docs/drivers.md): JSON lines, requests on stdin,
// answers on stdout, logs on stderr. One driver process is one client instance.
'use strict'

const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')
const KAFKAJS_VERSION = require('kafkajs/package.json').version

const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n')
const log = (...a) => process.stderr.write(a.join(' ') + '\n')

let kafka = null
let role = null
let producer = null
let consumer = null
let acks = -1
let requestTimeout = 4000
let consumerSettings = {}
const buffered = []        // records handed over by kafkajs's eachMessage, waiting for a poll
let pollWaiter = null

// the client's own words: the error's class name and message, with its cause when kafkajs
// wraps one (KafkaJSNumberOfRetriesExceeded wraps the last broker error)
function words(e) {
  let s = `${e.name || 'Error'}: ${e.message}`
  if (e.cause && e.cause.message) s += ` (cause: ${e.cause.name || 'Error'}: ${e.cause.message})`
  return s
}

function kafkaLogger() {
  return () => ({ namespace, level, label, log: entry }) => {
    const { message, ...extra } = entry
    log(`[kafkajs ${label} ${namespace}] ${message} ${JSON.stringify(extra)}`)
  }
}

// kafkajs's connect picks one bootstrap broker and fails if that one is down (a broker killed by
// the schedule): try again, as an application starting up would, until the deadline
async function connectWithin(client, ms) {
  const end = Date.now() + ms
  for (;;) {
    try {
      return await client.connect()
    } catch (e) {
      if (Date.now() >= end) throw e
      log(`connect: ${words(e)}; trying again`)
      await new Promise((r) => setTimeout(r, 200))
    }
  }
}

async function configure(req) {
  const s = req.settings || {}
  const opts = req.options || {}
  role = req.role
  if (role !== 'producer' && role !== 'consumer') return { ok: false, refused: `unknown role ${JSON.stringify(role)}` }
  if (kafka !== null) return { ok: false, refused: 'already configured' }
  requestTimeout = s.request_timeout_ms || 4000
  kafka = new Kafka({
    clientId: opts.clientId || 'kafkaverify',
    brokers: String(req.bootstrap).split(','),
    requestTimeout,
    connectionTimeout: opts.connectionTimeout || 3000,
    retry: opts.retry || { retries: 5, initialRetryTime: 100 },
    logLevel: logLevel.WARN,
    logCreator: kafkaLogger(),
  })
  if (role === 'producer') {
    const po = {}
    if (s.idempotence !== undefined && s.idempotence !== null) po.idempotent = !!s.idempotence
    if (s.max_in_flight !== undefined && s.max_in_flight !== null) po.maxInFlightRequests = s.max_in_flight
    if (s.retries !== undefined && s.retries !== null) po.retry = { retries: s.retries, initialRetryTime: 100 }
    if (opts.producer) Object.assign(po, opts.producer)
    acks = s.acks === undefined || s.acks === null || s.acks === 'all' ? -1 : Number(s.acks)
    try {
      producer = kafka.producer(po)
    } catch (e) {
      kafka = null
      return { ok: false, refused: words(e) }
    }
    if (po.idempotent && acks !== -1) {
      // kafkajs checks acks per send, before it connects: ask it with a send that cannot leave
      try {
        await producer.send({ topic: 'kafkaverify-probe', acks, messages: [{ value: 'x' }] })
      } catch (e) {
        if (/acks?/i.test(e.message) || /EoS/.test(e.message)) {
          kafka = null
          producer = null
          return { ok: false, refused: words(e) }
        }
      }
    }
    if (!req.probe) {
      try {
        await connectWithin(producer, s.connect_timeout_ms || 20000)
      } catch (e) {
        return { ok: false, refused: `connect failed: ${words(e)}` }
      }
    }
    const retries = po.retry ? po.retry.retries : (po.idempotent ? Number.MAX_SAFE_INTEGER : 5)
    return {
      ok: true,
      effective: {
        idempotent: !!po.idempotent,
        maxInFlightRequests: po.maxInFlightRequests === undefined ? null : po.maxInFlightRequests,
        'retry.retries': retries,
        acks,
        requestTimeout,
      },
    }
  }
  consumerSettings = {
    groupId: s.group || opts.groupId || 'kafkaverify',
    isolation: s.isolation || 'read_uncommitted',
    fromBeginning: (s.auto_offset_reset || 'earliest') === 'earliest',
  }
  const co = { groupId: consumerSettings.groupId, readUncommitted: consumerSettings.isolation !== 'read_committed' }
  if (opts.consumer) Object.assign(co, opts.consumer)
  try {
    consumer = kafka.consumer(co)
    if (!req.probe) await connectWithin(consumer, s.connect_timeout_ms || 20000)
  } catch (e) {
    return { ok: false, refused: words(e) }
  }
  return { ok: true, effective: { groupId: co.groupId, readUncommitted: co.readUncommitted, fromBeginning: consumerSettings.fromBeginning, autoCommit: false } }
}

function send(req) {
  if (!producer) return Promise.resolve({ type: 'error', error: 'not configured as a producer', definite: true })
  const msg = { value: req.value === null ? null : String(req.value), partition: req.partition }
  if (req.key !== undefined && req.key !== null) msg.key = String(req.key)
  return producer.send({ topic: req.topic, acks, timeout: requestTimeout, messages: [msg] }).then(
    (meta) => {
      const m = meta[0]
      return { type: 'ok', partition: m.partition, offset: Number(m.baseOffset) }
    },
    (e) => ({ type: 'error', error: words(e), definite: false })
  )
}

async function subscribe(req) {
  if (!consumer) return { type: 'error', error: 'not configured as a consumer' }
  for (const topic of req.topics) await consumer.subscribe({ topic, fromBeginning: consumerSettings.fromBeginning })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      buffered.push({ topic, partition, offset: Number(message.offset),
                      key: message.key === null ? null : message.key.toString(),
                      value: message.value === null ? null : message.value.toString() })
      if (pollWaiter) pollWaiter()
    },
  })
  return { type: 'ok' }
}

function poll(req) {
  if (!consumer) return Promise.resolve({ type: 'error', error: 'not configured as a consumer' })
  const take = () => ({ type: 'ok', records: buffered.splice(0, buffered.length) })
  if (buffered.length) return Promise.resolve(take())
  return new Promise((resolve) => {
    const t = setTimeout(() => { pollWaiter = null; resolve(take()) }, req.timeout_ms || 0)
    pollWaiter = () => { clearTimeout(t); pollWaiter = null; resolve(take()) }
  })
}

async function commit(req) {
  if (!consumer) return { type: 'error', error: 'not configured as a consumer' }
  await consumer.commitOffsets(req.offsets.map(([topic, partition, offset]) => ({ topic, partition, offset: String(offset) })))
  return { type: 'ok' }
}

async function close() {
  if (producer) await producer.disconnect()
  if (consumer) await consumer.disconnect()
  producer = null
  consumer = null
  return { type: 'ok' }
}

const OPS = {
  configure,
  send,
  flush: (req) => {
    const ms = req.timeout_ms || 30000
    return Promise.race([
      Promise.all([...pending]).then(() => ({ type: 'ok' })),
      new Promise((resolve) => setTimeout(() => resolve({ type: 'error', error: `flush: sends still unanswered after ${ms} ms`, definite: false }), ms).unref()),
    ])
  },
  assign: async () => ({ type: 'error', error: 'unsupported: kafkajs has no manual partition assignment (consumers join a group)' }),
  subscribe,
  poll,
  commit,
  close,
}
const pending = new Set()

function handle(line) {
  let req
  try {
    req = JSON.parse(line)
  } catch (e) {
    out({ id: null, type: 'protocol-error', error: `malformed JSON: ${e.message}` })
    return
  }
  if (req === null || typeof req !== 'object' || !Number.isInteger(req.id)) {
    out({ id: req && Number.isInteger(req.id) ? req.id : null, type: 'protocol-error', error: 'a request is an object with an integer id' })
    return
  }
  const fn = OPS[req.op]
  if (!fn) {
    out({ id: req.id, type: 'protocol-error', error: `unknown op ${JSON.stringify(req.op)}` })
    return
  }
  let p
  try {
    p = Promise.resolve(fn(req))
  } catch (e) {
    p = Promise.resolve({ type: 'error', error: words(e) })
  }
  const tracked = p.then(
    (ans) => out({ id: req.id, ...ans }),
    (e) => out({ id: req.id, type: 'error', error: words(e), definite: false })
  ).finally(() => pending.delete(tracked))
  if (req.op === 'send') pending.add(tracked)
  if (req.op === 'close') tracked.then(() => process.exit(0))
}

out({ hello: { protocol: 1, client: 'kafkajs', client_version: KAFKAJS_VERSION, language: 'node' } })
const rl = readline.createInterface({ input: process.stdin })
rl.on('line', (line) => { if (line.trim()) handle(line) })
rl.on('close', async () => {
  // stdin closed: the harness is gone; wait for what is pending (bounded) and leave
  setTimeout(() => process.exit(0), 5000).unref()
  try { await Promise.all([...pending]); await close() } catch (e) { log(words(e)) }
  process.exit(0)
})
