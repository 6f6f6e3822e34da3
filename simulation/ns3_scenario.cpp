// Family C's per-packet scenario: one bottleneck link of a perfSONAR path in ns-3, run at C++
// speed. training/simulator_ns3.py draws every random choice (seeded, with numpy), fills a
// nettel_ns3::LinkScenario, calls nettel_ns3::RunLink and reads back the probe delays and the
// per-minute byte counters; no Python runs while the simulation does.
//
// Topology (one link; ACKs and the reverse direction share the same devices):
//
//   near (probe, TCP) ==bottleneck (queue disc)==> R2 [--hop 2--> D]   probe receiver, sinks
//   far (TCP, UDP) --access--/                        \
//                                                       X (hop-2 cross UDP, with hop 2 only)
//
// The near node is the bottleneck router (and the near TCP sender and the probe's sender): its
// bottleneck device carries the link's queue discipline and buffer, and its transmitted bytes
// per minute are the utilisation label (a router's ifHCOutOctets). The far sender reaches it
// over a fast access link with extra delay. On some paths a second FIFO hop (R2 -> D), loaded
// by UDP cross traffic from X, follows; elsewhere R2 is the destination.

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace nettel_ns3
{
using namespace ns3;

//! Everything one link's simulation needs; times in seconds from the first minute's start.
struct LinkScenario
{
    uint64_t rng_run = 1;
    uint32_t minutes = 1;
    uint32_t segment_bytes = 1448;
    //! Initial congestion window in segments.
    uint32_t initial_window = 4;
    double rate_bps = 4e6;
    double bottleneck_delay_ms = 10.0;
    //! Extra one-way delay of the far TCP sender (longer RTTs than the near one's).
    double far_sender_delay_ms = 0.5;
    double access_rate_bps = 1e9;
    uint32_t queue_packets = 50;
    //! The device's own transmit queue below the queue disc (part of the buffer).
    uint32_t device_queue_packets = 1;
    //! Queue discipline of the bottleneck: fifo, red, fq_codel, codel or pie.
    std::string qdisc = "fifo";
    //! TypeIds of the congestion controls LinkScenario::flow_cc indexes (ns3::TcpCubic, ...).
    std::vector<std::string> congestion_controls;
    bool has_hop2 = false;
    double hop2_rate_bps = 1e9;
    double hop2_delay_ms = 0.5;
    uint32_t hop2_queue_packets = 100;
    uint32_t probe_bytes = 40;
    double probe_interval_s = 0.1;
    double probe_offset_s = 0.0;
    uint32_t udp_bytes = 1200;
    // short and bulk TCP flows: start, bytes (0 = until stop), stop (bulk), sender 0/1, cc index
    std::vector<double> flow_start;
    std::vector<double> flow_bytes;
    std::vector<double> flow_stop;
    std::vector<int> flow_sender;
    std::vector<int> flow_cc;
    // UDP on/off periods from S2 over the bottleneck, and cross traffic from X over hop 2
    std::vector<double> udp_start;
    std::vector<double> udp_stop;
    std::vector<double> udp_rate_bps;
    std::vector<double> cross_start;
    std::vector<double> cross_stop;
    std::vector<double> cross_rate_bps;
};

//! What the simulation measured.
struct LinkResult
{
    //! One-way delay of probe k in ms (NaN: lost), k = 0 .. minutes * probes per minute - 1.
    std::vector<double> probe_delay_ms;
    //! Bytes the bottleneck (and hop 2) devices started transmitting during each minute.
    std::vector<double> bottleneck_bytes;
    std::vector<double> hop2_bytes;
    //! Bytes the bottleneck's router received back from the far side (ACKs) during each minute.
    std::vector<double> bottleneck_bytes_in;
    //! Packets the bottleneck's queue disc dropped during each minute.
    std::vector<double> queue_drops;
    uint64_t flows_started = 0;
    uint64_t flows_completed = 0;
    uint64_t events = 0;
};

//! Sends `bytes` over one TCP connection (or until `stop` when bytes is 0), then closes it.
class TcpFlow : public SimpleRefCount<TcpFlow>
{
  public:
    TcpFlow(Ptr<Socket> socket, double bytes, uint64_t* completed)
        : m_socket(socket),
          m_remaining(std::llround(bytes)),
          m_unbounded(bytes <= 0),
          m_completed(completed)
    {
    }

    void Start(Address peer)
    {
        m_socket->SetConnectCallback(MakeCallback(&TcpFlow::Connected, Ptr<TcpFlow>(this)),
                                     MakeCallback(&TcpFlow::Failed, Ptr<TcpFlow>(this)));
        m_socket->SetCloseCallbacks(MakeCallback(&TcpFlow::Closed, Ptr<TcpFlow>(this)),
                                    MakeCallback(&TcpFlow::Closed, Ptr<TcpFlow>(this)));
        m_socket->Bind();
        m_socket->Connect(peer);
    }

    void Stop()
    {
        if (!m_closed)
        {
            m_closed = true;
            m_socket->Close();
        }
    }

  private:
    void Connected(Ptr<Socket> socket)
    {
        socket->SetSendCallback(MakeCallback(&TcpFlow::Fill, Ptr<TcpFlow>(this)));
        Fill(socket, socket->GetTxAvailable());
    }

    void Failed(Ptr<Socket>)
    {
        Release();
    }

    void Fill(Ptr<Socket> socket, uint32_t)
    {
        while (!m_closed && (m_unbounded || m_remaining > 0))
        {
            uint32_t room = socket->GetTxAvailable();
            if (room == 0)
            {
                return;
            }
            int64_t chunk = m_unbounded ? room : std::min<int64_t>(room, m_remaining);
            int sent = socket->Send(Create<Packet>(static_cast<uint32_t>(chunk)));
            if (sent <= 0)
            {
                return;
            }
            m_remaining -= sent;
        }
        if (!m_unbounded && !m_closed)
        {
            ++*m_completed;
            Stop();
        }
    }

    void Closed(Ptr<Socket>)
    {
        Release();
    }

    //! Break the socket <-> flow cycle of callbacks so both are freed.
    void Release()
    {
        m_socket->SetSendCallback(MakeNullCallback<void, Ptr<Socket>, uint32_t>());
        m_socket->SetCloseCallbacks(MakeNullCallback<void, Ptr<Socket>>(),
                                    MakeNullCallback<void, Ptr<Socket>>());
        m_socket->SetConnectCallback(MakeNullCallback<void, Ptr<Socket>>(),
                                     MakeNullCallback<void, Ptr<Socket>>());
    }

    Ptr<Socket> m_socket;
    int64_t m_remaining;
    bool m_unbounded;
    bool m_closed = false;
    uint64_t* m_completed;
};

//! Accepts TCP connections, discards their data and closes each when its peer does.
class TcpDiscard : public SimpleRefCount<TcpDiscard>
{
  public:
    TcpDiscard(Ptr<Node> node, uint16_t port)
    {
        m_listener = Socket::CreateSocket(node, TcpSocketFactory::GetTypeId());
        m_listener->Bind(InetSocketAddress(Ipv4Address::GetAny(), port));
        m_listener->Listen();
        m_listener->SetAcceptCallback(
            MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
            MakeCallback(&TcpDiscard::Accepted, Ptr<TcpDiscard>(this)));
    }

    void Shutdown()
    {
        m_listener->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                      MakeNullCallback<void, Ptr<Socket>, const Address&>());
    }

  private:
    void Accepted(Ptr<Socket> socket, const Address&)
    {
        socket->SetRecvCallback(MakeCallback(&TcpDiscard::Drain));
        socket->SetCloseCallbacks(MakeCallback(&TcpDiscard::PeerClosed),
                                  MakeCallback(&TcpDiscard::Forget));
    }

    static void Drain(Ptr<Socket> socket)
    {
        while (socket->Recv())
        {
        }
    }

    static void PeerClosed(Ptr<Socket> socket)
    {
        socket->Close();
        Forget(socket);
    }

    static void Forget(Ptr<Socket> socket)
    {
        socket->SetRecvCallback(MakeNullCallback<void, Ptr<Socket>>());
    }

    Ptr<Socket> m_listener;
};

//! Constant-rate UDP during given periods (on/off traffic).
class UdpPeriods : public SimpleRefCount<UdpPeriods>
{
  public:
    UdpPeriods(Ptr<Node> node, Address peer, uint32_t bytes)
        : m_bytes(bytes)
    {
        m_socket = Socket::CreateSocket(node, UdpSocketFactory::GetTypeId());
        m_socket->Bind();
        m_socket->Connect(peer);
    }

    void Schedule(const std::vector<double>& start,
                  const std::vector<double>& stop,
                  const std::vector<double>& rate_bps)
    {
        for (size_t i = 0; i < start.size(); ++i)
        {
            Time gap = Seconds(m_bytes * 8.0 / rate_bps[i]);
            Simulator::Schedule(Seconds(start[i]),
                                &UdpPeriods::Send,
                                Ptr<UdpPeriods>(this),
                                gap,
                                Seconds(stop[i]));
        }
    }

    void Close()
    {
        m_socket->Close();
    }

  private:
    void Send(Time gap, Time stop)
    {
        if (Simulator::Now() >= stop)
        {
            return;
        }
        m_socket->Send(Create<Packet>(m_bytes));
        Simulator::Schedule(gap, &UdpPeriods::Send, Ptr<UdpPeriods>(this), gap, stop);
    }

    Ptr<Socket> m_socket;
    uint32_t m_bytes;
};

//! The 10 Hz powstream-like probe: sequence number and send time in every packet.
class Probe : public SimpleRefCount<Probe>
{
  public:
    Probe(Ptr<Node> sender, Ptr<Node> receiver, Address peer, uint16_t port, uint32_t count,
          std::vector<double>* delays)
        : m_count(count),
          m_delays(delays)
    {
        m_receiver = Socket::CreateSocket(receiver, UdpSocketFactory::GetTypeId());
        m_receiver->Bind(InetSocketAddress(Ipv4Address::GetAny(), port));
        m_receiver->SetRecvCallback(MakeCallback(&Probe::Received, Ptr<Probe>(this)));
        m_sender = Socket::CreateSocket(sender, UdpSocketFactory::GetTypeId());
        m_sender->Bind();
        m_sender->Connect(peer);
    }

    void Start(double offset_s, double interval_s, uint32_t bytes)
    {
        m_interval = Seconds(interval_s);
        m_bytes = bytes;
        Simulator::Schedule(Seconds(offset_s), &Probe::Send, Ptr<Probe>(this));
    }

    void Close()
    {
        m_receiver->SetRecvCallback(MakeNullCallback<void, Ptr<Socket>>());
        m_receiver->Close();
        m_sender->Close();
    }

  private:
    void Send()
    {
        if (m_sequence >= m_count)
        {
            return;
        }
        SeqTsHeader header;
        header.SetSeq(m_sequence++);
        Ptr<Packet> packet = Create<Packet>(m_bytes);
        packet->AddHeader(header);
        m_sender->Send(packet);
        Simulator::Schedule(m_interval, &Probe::Send, Ptr<Probe>(this));
    }

    void Received(Ptr<Socket> socket)
    {
        while (Ptr<Packet> packet = socket->Recv())
        {
            SeqTsHeader header;
            packet->RemoveHeader(header);
            uint32_t sequence = header.GetSeq();
            if (sequence < m_delays->size())
            {
                (*m_delays)[sequence] = (Simulator::Now() - header.GetTs()).GetSeconds() * 1e3;
            }
        }
    }

    Ptr<Socket> m_sender;
    Ptr<Socket> m_receiver;
    Time m_interval;
    uint32_t m_bytes = 40;
    uint32_t m_sequence = 0;
    uint32_t m_count;
    std::vector<double>* m_delays;
};

//! Cumulative counters of a run, sampled into per-minute differences.
struct Counters
{
    double bottleneck_bytes = 0;
    double bottleneck_bytes_in = 0;
    double hop2_bytes = 0;
    double drops = 0;
};

inline void CountBytes(double* total, Ptr<const Packet> packet)
{
    *total += packet->GetSize();
}

inline void CountDrop(double* total, Ptr<const QueueDiscItem>)
{
    *total += 1;
}

inline void SampleMinute(Counters* counters, Counters* last, LinkResult* result)
{
    result->bottleneck_bytes.push_back(counters->bottleneck_bytes - last->bottleneck_bytes);
    result->hop2_bytes.push_back(counters->hop2_bytes - last->hop2_bytes);
    result->bottleneck_bytes_in.push_back(counters->bottleneck_bytes_in -
                                          last->bottleneck_bytes_in);
    result->queue_drops.push_back(counters->drops - last->drops);
    *last = *counters;
}

inline std::string Packets(uint32_t n)
{
    return std::to_string(n) + "p";
}

inline TrafficControlHelper BottleneckQueue(const LinkScenario& s)
{
    TrafficControlHelper tc;
    uint32_t limit = s.queue_packets;
    double per_packet_ms = (s.segment_bytes + 52) * 8.0 / s.rate_bps * 1e3;
    if (s.qdisc == "red")
    {
        double min_th = std::max(1.0, limit / 5.0);
        tc.SetRootQueueDisc("ns3::RedQueueDisc",
                            "MaxSize", QueueSizeValue(QueueSize(Packets(limit))),
                            "MinTh", DoubleValue(min_th),
                            "MaxTh", DoubleValue(std::max(min_th + 1, limit / 2.0)),
                            "MeanPktSize", UintegerValue(s.segment_bytes + 52),
                            "Gentle", BooleanValue(true),
                            "LinkBandwidth", DataRateValue(DataRate(s.rate_bps)),
                            "LinkDelay", TimeValue(MilliSeconds(s.bottleneck_delay_ms)));
    }
    else if (s.qdisc == "fq_codel" || s.qdisc == "codel")
    {
        // CoDel's target must exceed a packet's transmission time
        std::string target = std::to_string(std::max(5.0, 1.5 * per_packet_ms)) + "ms";
        tc.SetRootQueueDisc(s.qdisc == "codel" ? "ns3::CoDelQueueDisc" : "ns3::FqCoDelQueueDisc",
                            "MaxSize", QueueSizeValue(QueueSize(Packets(limit))),
                            "Target", StringValue(target));
    }
    else if (s.qdisc == "pie")
    {
        tc.SetRootQueueDisc("ns3::PieQueueDisc",
                            "MaxSize", QueueSizeValue(QueueSize(Packets(limit))),
                            "QueueDelayReference", TimeValue(MilliSeconds(15)));
    }
    else if (s.qdisc == "fifo")
    {
        tc.SetRootQueueDisc("ns3::FifoQueueDisc",
                            "MaxSize", QueueSizeValue(QueueSize(Packets(limit))));
    }
    else
    {
        throw std::invalid_argument("unknown queue discipline " + s.qdisc);
    }
    return tc;
}

inline NetDeviceContainer Connect(Ptr<Node> a,
                                  Ptr<Node> b,
                                  double rate_bps,
                                  double delay_ms,
                                  uint32_t device_queue_packets)
{
    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(rate_bps)));
    p2p.SetChannelAttribute("Delay", TimeValue(MicroSeconds(std::llround(delay_ms * 1e3))));
    // a short device queue, so the queue disc above it holds the backlog (as a router's does)
    p2p.SetQueue("ns3::DropTailQueue",
                 "MaxSize",
                 QueueSizeValue(QueueSize(Packets(device_queue_packets))));
    return p2p.Install(a, b);
}

//! Schedule the short and bulk TCP flows of `s` from near or far to `peer`, counted in `result`.
inline void ScheduleTcpFlows(const LinkScenario& s,
                             Ptr<Node> near,
                             Ptr<Node> far,
                             Address peer,
                             LinkResult* result)
{
    std::vector<TypeId> controls;
    for (const auto& name : s.congestion_controls)
    {
        controls.push_back(TypeId::LookupByName(name));
    }
    Ptr<Node> senders[2] = {near, far};
    double end_s = 60.0 * s.minutes;
    for (size_t i = 0; i < s.flow_start.size(); ++i)
    {
        Ptr<Node> sender = senders[s.flow_sender[i]];
        TypeId control = controls.at(s.flow_cc[i]);
        double bytes = s.flow_bytes[i];
        double stop = s.flow_stop[i];
        Simulator::Schedule(Seconds(s.flow_start[i]), [sender, control, bytes, stop, end_s, peer,
                                                       result]() {
            Ptr<TcpL4Protocol> tcp = sender->GetObject<TcpL4Protocol>();
            Ptr<Socket> socket = tcp->CreateSocket(control);
            if (control.GetName() == "ns3::TcpBbr")
            {
                DynamicCast<TcpSocketBase>(socket)->SetPacingStatus(true);
            }
            Ptr<TcpFlow> flow = Create<TcpFlow>(socket, bytes, &result->flows_completed);
            flow->Start(peer);
            ++result->flows_started;
            if (bytes <= 0 && stop < end_s)
            {
                Simulator::Schedule(Seconds(stop) - Simulator::Now(), &TcpFlow::Stop, flow);
            }
        });
    }
}

//! Simulate one link for s.minutes minutes (plus the last probes' flight) and measure it.
inline LinkResult RunLink(const LinkScenario& s)
{
    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(s.rng_run);
    RngSeedManager::ResetNextStreamIndex();
    Ipv4AddressGenerator::Reset();
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(s.segment_bytes));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(1 << 21));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(1 << 21));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(s.initial_window));

    // the near sender is the bottleneck router itself (its NIC is the bottleneck): one hop
    // fewer per packet than a separate host behind a fast access link, and the same queue
    NodeContainer nodes;
    nodes.Create(s.has_hop2 ? 5 : 3);
    Ptr<Node> near = nodes.Get(0), far = nodes.Get(1), r2 = nodes.Get(2);
    InternetStackHelper internet;
    internet.Install(nodes);

    uint32_t q = s.device_queue_packets;
    NetDeviceContainer access = Connect(far, near, s.access_rate_bps, s.far_sender_delay_ms, q);
    NetDeviceContainer bottleneck = Connect(near, r2, s.rate_bps, s.bottleneck_delay_ms, q);
    QueueDiscContainer bottleneck_queue = BottleneckQueue(s).Install(bottleneck.Get(0));
    std::vector<NetDeviceContainer> links = {access, bottleneck};
    Ptr<Node> destination = r2;
    NetDeviceContainer hop2;
    if (s.has_hop2)
    {
        destination = nodes.Get(3);
        hop2 = Connect(r2, destination, s.hop2_rate_bps, s.hop2_delay_ms, q);
        TrafficControlHelper fifo;
        fifo.SetRootQueueDisc("ns3::FifoQueueDisc",
                              "MaxSize", QueueSizeValue(QueueSize(Packets(s.hop2_queue_packets))));
        fifo.Install(hop2.Get(0));
        links.push_back(hop2);
        links.push_back(Connect(nodes.Get(4), r2, s.access_rate_bps, 0.1, q));
    }

    Ipv4AddressHelper addresses;
    int network = 1;
    for (const auto& devices : links)
    {
        std::string base = "10.0." + std::to_string(network++) + ".0";
        addresses.SetBase(Ipv4Address(base.c_str()), "255.255.255.0");
        addresses.Assign(devices);
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();
    // interface 0 is the loopback; 1 the destination's link towards the senders
    Ipv4Address receiver = destination->GetObject<Ipv4>()->GetAddress(1, 0).GetLocal();

    LinkResult result;
    uint32_t probes = static_cast<uint32_t>(std::llround(60.0 / s.probe_interval_s)) * s.minutes;
    result.probe_delay_ms.assign(probes, std::numeric_limits<double>::quiet_NaN());

    Counters counters, last;
    bottleneck.Get(0)->TraceConnectWithoutContext(
        "PhyTxBegin", MakeBoundCallback(&CountBytes, &counters.bottleneck_bytes));
    bottleneck.Get(0)->TraceConnectWithoutContext(
        "PhyRxEnd", MakeBoundCallback(&CountBytes, &counters.bottleneck_bytes_in));
    if (s.has_hop2)
    {
        hop2.Get(0)->TraceConnectWithoutContext(
            "PhyTxBegin", MakeBoundCallback(&CountBytes, &counters.hop2_bytes));
    }
    bottleneck_queue.Get(0)->TraceConnectWithoutContext(
        "Drop", MakeBoundCallback(&CountDrop, &counters.drops));
    for (uint32_t minute = 1; minute <= s.minutes; ++minute)
    {
        Simulator::Schedule(Seconds(60.0 * minute), &SampleMinute, &counters, &last, &result);
    }

    const uint16_t tcp_port = 5000, probe_port = 861, udp_port = 9, cross_port = 10;
    Ptr<TcpDiscard> sink = Create<TcpDiscard>(destination, tcp_port);
    Ptr<Probe> probe =
        Create<Probe>(near, destination, InetSocketAddress(receiver, probe_port), probe_port, probes,
                      &result.probe_delay_ms);
    probe->Start(s.probe_offset_s, s.probe_interval_s, s.probe_bytes);

    Ptr<UdpPeriods> udp = Create<UdpPeriods>(far, InetSocketAddress(receiver, udp_port), s.udp_bytes);
    udp->Schedule(s.udp_start, s.udp_stop, s.udp_rate_bps);
    Ptr<UdpPeriods> cross_udp;
    if (s.has_hop2)
    {
        cross_udp = Create<UdpPeriods>(nodes.Get(4), InetSocketAddress(receiver, cross_port),
                                       s.udp_bytes);
        cross_udp->Schedule(s.cross_start, s.cross_stop, s.cross_rate_bps);
    }

    ScheduleTcpFlows(s, near, far, InetSocketAddress(receiver, tcp_port), &result);
    double end_s = 60.0 * s.minutes;
    Simulator::Stop(Seconds(end_s + 3.0));
    Simulator::Run();
    result.events = Simulator::GetEventCount();
    probe->Close();
    udp->Close();
    if (cross_udp)
    {
        cross_udp->Close();
    }
    sink->Shutdown();
    Simulator::Destroy();
    return result;
}

} // namespace nettel_ns3
