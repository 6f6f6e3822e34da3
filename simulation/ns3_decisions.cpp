// Decision scenarios on family C's physics: K candidate source paths to one destination, each
// with its own bottleneck and cross traffic as ns3_scenario.cpp draws them, stepped minute by
// minute from Python (simulation/decision_world.py), which reads each minute's probe delays,
// serves a cost matrix from them and starts file transfers on the path a policy picks. Loaded
// with cppyy after ns3_scenario.cpp, whose classes (TcpFlow, TcpDiscard, UdpPeriods, Probe,
// Counters, BottleneckQueue, Connect) it reuses.
//
// Topology (path i of K; D is the one destination of every path):
//
//   far_i --access--> near_i ==bottleneck_i (queue disc)==> r2_i --exit_i--> D
//
// exit_i is a fast link, or path i's own second FIFO hop loaded by UDP cross traffic (as a
// family-C link with a second hop), or, for the two paths of a shared segment, a fast link to
// a router X whose FIFO link X --shared--> D both paths cross, loaded by UDP cross traffic of
// its own (a congested shared backbone). Transfers are TCP flows from near_i to a sink of
// their own on D; a transfer completes when D has received its last byte. perfSONAR's
// throughput tests (when the scenario has them) are TCP flows on the same path, from near_i to
// a sink of their own on D, that send as fast as they can for the test's duration; a test's
// result is what its sink received during that time.

namespace nettel_ns3
{
using namespace ns3;

//! Receives one transfer on its own port and notes when its last byte arrived.
class TransferSink : public SimpleRefCount<TransferSink>
{
  public:
    TransferSink(Ptr<Node> node, uint16_t port, double bytes)
        : m_bytes(bytes)
    {
        m_listener = Socket::CreateSocket(node, TcpSocketFactory::GetTypeId());
        m_listener->Bind(InetSocketAddress(Ipv4Address::GetAny(), port));
        m_listener->Listen();
        m_listener->SetAcceptCallback(
            MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
            MakeCallback(&TransferSink::Accepted, Ptr<TransferSink>(this)));
    }

    //! Seconds from the simulation's start to the last byte's arrival; -1 while incomplete.
    double DoneAt() const
    {
        return m_done_at;
    }

    double Received() const
    {
        return m_received;
    }

    void Shutdown()
    {
        m_listener->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                      MakeNullCallback<void, Ptr<Socket>, const Address&>());
        if (m_socket)
        {
            m_socket->SetRecvCallback(MakeNullCallback<void, Ptr<Socket>>());
        }
    }

  private:
    void Accepted(Ptr<Socket> socket, const Address&)
    {
        m_socket = socket;
        socket->SetRecvCallback(MakeCallback(&TransferSink::Drain, Ptr<TransferSink>(this)));
    }

    void Drain(Ptr<Socket> socket)
    {
        while (Ptr<Packet> packet = socket->Recv())
        {
            m_received += packet->GetSize();
        }
        if (m_done_at < 0 && m_received >= m_bytes)
        {
            m_done_at = Simulator::Now().GetSeconds();
        }
    }

    Ptr<Socket> m_listener;
    Ptr<Socket> m_socket;
    double m_bytes;
    double m_received = 0;
    double m_done_at = -1;
};

//! The K paths of one decision scenario; every path's traffic spans `minutes` minutes.
struct DecisionScenario
{
    uint64_t rng_run = 1;
    uint32_t minutes = 1;
    std::vector<LinkScenario> paths;
    //! Paths behind the shared segment (-1: none).
    int shared_first = -1;
    int shared_second = -1;
    double shared_rate_bps = 1e9;
    double shared_delay_ms = 1.0;
    uint32_t shared_queue_packets = 100;
    std::vector<double> shared_cross_start;
    std::vector<double> shared_cross_stop;
    std::vector<double> shared_cross_rate_bps;
    std::string transfer_cc = "ns3::TcpCubic";
    //! Throughput tests: the path and start (s) of each, all of one duration.
    std::vector<int> test_path;
    std::vector<double> test_start;
    double test_duration_s = 20.0;
    uint32_t test_send_buffer_bytes = 1 << 18;
};

//! One scenario being simulated; at most one per process (ns-3's Simulator is global).
class DecisionWorld
{
  public:
    explicit DecisionWorld(const DecisionScenario& s)
        : m_scenario(s),
          m_results(s.paths.size()),
          m_counters(s.paths.size()),
          m_last(s.paths.size())
    {
        RngSeedManager::SetSeed(1);
        RngSeedManager::SetRun(s.rng_run);
        RngSeedManager::ResetNextStreamIndex();
        Ipv4AddressGenerator::Reset();
        const LinkScenario& first = s.paths.at(0);
        Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(first.segment_bytes));
        Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(1 << 21));
        Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(1 << 21));
        Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(first.initial_window));
        m_destination = CreateObject<Node>();
        InternetStackHelper internet;
        internet.Install(m_destination);
        bool shared = s.shared_first >= 0 && s.shared_second >= 0;
        if (shared)
        {
            m_shared_router = CreateObject<Node>();
            m_shared_cross = CreateObject<Node>();
            internet.Install(m_shared_router);
            internet.Install(m_shared_cross);
            NetDeviceContainer link = Connect(m_shared_router, m_destination, s.shared_rate_bps,
                                              s.shared_delay_ms, first.device_queue_packets);
            Fifo(s.shared_queue_packets).Install(link.Get(0));
            m_links.push_back(link);
            m_links.push_back(Connect(m_shared_cross, m_shared_router, first.access_rate_bps, 0.1,
                                      first.device_queue_packets));
            m_shared_receiver_link = 0;
        }
        for (size_t i = 0; i < s.paths.size(); ++i)
        {
            BuildPath(i, shared && (static_cast<int>(i) == s.shared_first ||
                                    static_cast<int>(i) == s.shared_second));
        }
        Ipv4AddressHelper addresses;
        for (size_t n = 0; n < m_links.size(); ++n)
        {
            std::string base = "10." + std::to_string(1 + n / 250) + "." +
                               std::to_string(n % 250) + ".0";
            addresses.SetBase(Ipv4Address(base.c_str()), "255.255.255.0");
            addresses.Assign(m_links[n]);
        }
        Ipv4GlobalRoutingHelper::PopulateRoutingTables();
        m_sink = Create<TcpDiscard>(m_destination, kTcpPort);
        m_transfer_cc = TypeId::LookupByName(s.transfer_cc);
        for (size_t i = 0; i < s.paths.size(); ++i)
        {
            StartPathTraffic(i);
        }
        ScheduleThroughputTests();
        if (shared)
        {
            Address to = InetSocketAddress(ReceiverAddress(m_shared_receiver_link), kCrossPort);
            m_shared_udp = Create<UdpPeriods>(m_shared_cross, to, first.udp_bytes);
            m_shared_udp->Schedule(s.shared_cross_start, s.shared_cross_stop,
                                   s.shared_cross_rate_bps);
        }
        for (uint32_t minute = 1; minute <= s.minutes; ++minute)
        {
            for (size_t i = 0; i < s.paths.size(); ++i)
            {
                Simulator::Schedule(Seconds(60.0 * minute), &SampleMinute, &m_counters[i],
                                    &m_last[i], &m_results[i]);
            }
        }
    }

    ~DecisionWorld()
    {
        for (auto& probe : m_probes)
        {
            probe->Close();
        }
        for (auto& udp : m_udp)
        {
            udp->Close();
        }
        if (m_shared_udp)
        {
            m_shared_udp->Close();
        }
        for (auto& sink : m_transfers)
        {
            sink->Shutdown();
        }
        for (auto& sink : m_test_sinks)
        {
            sink->Shutdown();
        }
        m_sink->Shutdown();
        Simulator::Destroy();
    }

    //! Simulate up to `t_s` seconds from the first minute's start.
    void RunUntil(double t_s)
    {
        Time until = Seconds(t_s);
        if (until > Simulator::Now())
        {
            Simulator::Stop(until - Simulator::Now());
            Simulator::Run();
        }
    }

    double Now() const
    {
        return Simulator::Now().GetSeconds();
    }

    //! Start a transfer of `bytes` on path `path` at `start_s` (not before now); its id.
    uint32_t StartTransfer(uint32_t path, double start_s, double bytes)
    {
        uint32_t id = static_cast<uint32_t>(m_transfers.size());
        if (id + kTransferPortBase > 65535)
        {
            throw std::out_of_range("too many transfers in one scenario");
        }
        uint16_t port = static_cast<uint16_t>(kTransferPortBase + id);
        m_transfers.push_back(Create<TransferSink>(m_destination, port, bytes));
        Ptr<Node> sender = m_near.at(path);
        Address peer = InetSocketAddress(m_receivers.at(path), port);
        TypeId control = m_transfer_cc;
        uint64_t* completed = &m_transfers_handed_over;
        Time delay = std::max(Seconds(start_s) - Simulator::Now(), Seconds(0));
        Simulator::Schedule(delay, [sender, control, bytes, peer, completed]() {
            Ptr<Socket> socket = sender->GetObject<TcpL4Protocol>()->CreateSocket(control);
            Create<TcpFlow>(socket, bytes, completed)->Start(peer);
        });
        return id;
    }

    double Completion(uint32_t id) const
    {
        return m_transfers.at(id)->DoneAt();
    }

    double ReceivedBytes(uint32_t id) const
    {
        return m_transfers.at(id)->Received();
    }

    //! Path `path`'s probe delays (ms, NaN lost) of minute `minute` (0-based).
    std::vector<double> MinuteDelays(uint32_t path, uint32_t minute) const
    {
        const std::vector<double>& all = m_results.at(path).probe_delay_ms;
        size_t per_minute = all.size() / m_scenario.minutes;
        auto begin = all.begin() + static_cast<std::ptrdiff_t>(per_minute * minute);
        return std::vector<double>(begin, begin + static_cast<std::ptrdiff_t>(per_minute));
    }

    //! Bytes path `path`'s bottleneck transmitted in each minute sampled so far.
    std::vector<double> BottleneckBytes(uint32_t path) const
    {
        return m_results.at(path).bottleneck_bytes;
    }

    //! Bytes each throughput test's sink received during the test; -1 until it has ended.
    std::vector<double> ThroughputTestBytes() const
    {
        return m_test_bytes;
    }

    uint64_t Events() const
    {
        return Simulator::GetEventCount();
    }

  private:
    static constexpr uint16_t kTcpPort = 5000;
    static constexpr uint16_t kUdpPort = 9;
    static constexpr uint16_t kCrossPort = 10;
    static constexpr uint16_t kProbePortBase = 2000;
    static constexpr uint32_t kTransferPortBase = 10000;
    static constexpr uint32_t kTestPortBase = 6000;

    static TrafficControlHelper Fifo(uint32_t packets)
    {
        TrafficControlHelper fifo;
        fifo.SetRootQueueDisc("ns3::FifoQueueDisc",
                              "MaxSize", QueueSizeValue(QueueSize(Packets(packets))));
        return fifo;
    }

    //! D's address on link `n` (D is its second node).
    Ipv4Address ReceiverAddress(size_t n) const
    {
        Ptr<NetDevice> device = m_links.at(n).Get(1);
        Ptr<Ipv4> ip = m_destination->GetObject<Ipv4>();
        return ip->GetAddress(ip->GetInterfaceForDevice(device), 0).GetLocal();
    }

    void BuildPath(size_t i, bool behind_shared)
    {
        const LinkScenario& s = m_scenario.paths[i];
        NodeContainer nodes;
        nodes.Create(3);
        InternetStackHelper internet;
        internet.Install(nodes);
        Ptr<Node> near = nodes.Get(0), far = nodes.Get(1), r2 = nodes.Get(2);
        uint32_t q = s.device_queue_packets;
        m_links.push_back(Connect(far, near, s.access_rate_bps, s.far_sender_delay_ms, q));
        NetDeviceContainer bottleneck = Connect(near, r2, s.rate_bps, s.bottleneck_delay_ms, q);
        QueueDiscContainer queue = BottleneckQueue(s).Install(bottleneck.Get(0));
        m_links.push_back(bottleneck);
        if (behind_shared)
        {
            m_links.push_back(Connect(r2, m_shared_router, s.access_rate_bps, 0.05, q));
            m_receiver_links.push_back(m_shared_receiver_link);
        }
        else if (s.has_hop2)
        {
            NetDeviceContainer hop2 = Connect(r2, m_destination, s.hop2_rate_bps, s.hop2_delay_ms, q);
            Fifo(s.hop2_queue_packets).Install(hop2.Get(0));
            m_receiver_links.push_back(m_links.size());
            m_links.push_back(hop2);
            Ptr<Node> cross = CreateObject<Node>();
            internet.Install(cross);
            m_links.push_back(Connect(cross, r2, s.access_rate_bps, 0.1, q));
            m_cross_nodes.push_back(cross);
        }
        else
        {
            m_receiver_links.push_back(m_links.size());
            m_links.push_back(Connect(r2, m_destination, s.access_rate_bps, 0.01, q));
        }
        if (!s.has_hop2 || behind_shared)
        {
            m_cross_nodes.push_back(nullptr);
        }
        m_near.push_back(near);
        m_far.push_back(far);
        Counters* counters = &m_counters[i];
        bottleneck.Get(0)->TraceConnectWithoutContext(
            "PhyTxBegin", MakeBoundCallback(&CountBytes, &counters->bottleneck_bytes));
        bottleneck.Get(0)->TraceConnectWithoutContext(
            "PhyRxEnd", MakeBoundCallback(&CountBytes, &counters->bottleneck_bytes_in));
        queue.Get(0)->TraceConnectWithoutContext("Drop",
                                                 MakeBoundCallback(&CountDrop, &counters->drops));
    }

    void StartPathTraffic(size_t i)
    {
        const LinkScenario& s = m_scenario.paths[i];
        Ipv4Address receiver = ReceiverAddress(m_receiver_links[i]);
        m_receivers.push_back(receiver);
        LinkResult& result = m_results[i];
        uint32_t probes = static_cast<uint32_t>(std::llround(60.0 / s.probe_interval_s)) *
                          m_scenario.minutes;
        result.probe_delay_ms.assign(probes, std::numeric_limits<double>::quiet_NaN());
        uint16_t probe_port = static_cast<uint16_t>(kProbePortBase + i);
        Ptr<Probe> probe = Create<Probe>(m_near[i], m_destination,
                                         InetSocketAddress(receiver, probe_port), probe_port,
                                         probes, &result.probe_delay_ms);
        probe->Start(s.probe_offset_s, s.probe_interval_s, s.probe_bytes);
        m_probes.push_back(probe);
        Ptr<UdpPeriods> udp =
            Create<UdpPeriods>(m_far[i], InetSocketAddress(receiver, kUdpPort), s.udp_bytes);
        udp->Schedule(s.udp_start, s.udp_stop, s.udp_rate_bps);
        m_udp.push_back(udp);
        if (m_cross_nodes[i])
        {
            Ptr<UdpPeriods> cross = Create<UdpPeriods>(
                m_cross_nodes[i], InetSocketAddress(receiver, kCrossPort), s.udp_bytes);
            cross->Schedule(s.cross_start, s.cross_stop, s.cross_rate_bps);
            m_udp.push_back(cross);
        }
        ScheduleTcpFlows(s, m_near[i], m_far[i], InetSocketAddress(receiver, kTcpPort), &result);
    }

    //! Every throughput test: its sink listens from the start, its sender runs from the
    //! test's start for its duration (then closes, as iperf3 does), and the bytes received
    //! by then are its result.
    void ScheduleThroughputTests()
    {
        const DecisionScenario& s = m_scenario;
        if (s.test_path.size() != s.test_start.size() || s.test_path.size() > 4000)
        {
            throw std::invalid_argument("throughput tests: one path per start, at most 4000");
        }
        m_test_bytes.assign(s.test_path.size(), -1.0);
        for (size_t n = 0; n < s.test_path.size(); ++n)
        {
            size_t path = static_cast<size_t>(s.test_path.at(n));
            uint16_t port = static_cast<uint16_t>(kTestPortBase + n);
            Ptr<TransferSink> sink = Create<TransferSink>(m_destination, port, 1e18);
            m_test_sinks.push_back(sink);
            Ptr<Node> sender = m_near.at(path);
            Address peer = InetSocketAddress(m_receivers.at(path), port);
            TypeId control = m_transfer_cc;
            Time duration = Seconds(s.test_duration_s);
            uint32_t buffer = s.test_send_buffer_bytes;
            uint64_t* handed_over = &m_tests_handed_over;
            Simulator::Schedule(Seconds(s.test_start[n]), [=]() {
                Ptr<Socket> socket = sender->GetObject<TcpL4Protocol>()->CreateSocket(control);
                socket->SetAttribute("SndBufSize", UintegerValue(buffer));
                Ptr<TcpFlow> flow = Create<TcpFlow>(socket, 0, handed_over);
                flow->Start(peer);
                Simulator::Schedule(duration, &TcpFlow::Stop, flow);
            });
            double* result = &m_test_bytes[n];
            Simulator::Schedule(Seconds(s.test_start[n] + s.test_duration_s),
                                [sink, result]() { *result = sink->Received(); });
        }
    }

    DecisionScenario m_scenario;
    std::vector<LinkResult> m_results;
    std::vector<Counters> m_counters;
    std::vector<Counters> m_last;
    std::vector<NetDeviceContainer> m_links;
    std::vector<size_t> m_receiver_links;
    std::vector<Ipv4Address> m_receivers;
    std::vector<Ptr<Node>> m_near;
    std::vector<Ptr<Node>> m_far;
    std::vector<Ptr<Node>> m_cross_nodes;
    std::vector<Ptr<Probe>> m_probes;
    std::vector<Ptr<UdpPeriods>> m_udp;
    std::vector<Ptr<TransferSink>> m_transfers;
    std::vector<Ptr<TransferSink>> m_test_sinks;
    std::vector<double> m_test_bytes;
    Ptr<Node> m_destination;
    Ptr<Node> m_shared_router;
    Ptr<Node> m_shared_cross;
    Ptr<UdpPeriods> m_shared_udp;
    Ptr<TcpDiscard> m_sink;
    size_t m_shared_receiver_link = 0;
    TypeId m_transfer_cc;
    uint64_t m_transfers_handed_over = 0;
    uint64_t m_tests_handed_over = 0;
};

} // namespace nettel_ns3
